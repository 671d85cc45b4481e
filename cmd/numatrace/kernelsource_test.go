package main

// The kernel-side request source on a real server, with no latency flag:
// redis-server under an open-loop client that logs its own latency of
// every request, from its write to the end of the reply. Per window,
// numatrace's count and p99 of the requests it timed on redis's sockets
// must match the client's.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

func TestKernelTimesRedisRequestsWithNoLatencyFlag(t *testing.T) {
	testutil.RequireRoot(t)
	r := testutil.StartRedis(t)
	pinTasks(t, r.Cmd.Process.Pid, serverCPU)
	addr := fmt.Sprintf("127.0.0.1:%d", r.Port)
	nt := startAttach(t, "--pid", strconv.Itoa(r.Cmd.Process.Pid), "--json", "--window", "1s", "--duration", "60s")
	// The client's wall-clock end times, on numatrace's CLOCK_MONOTONIC.
	monoMinusWall := int64(monotonicNs()) - time.Now().UnixNano()
	stop := make(chan struct{})
	done := respClient(t, r, clientConns, 1000, stop)
	time.Sleep(8 * time.Second)
	close(stop)
	client := <-done
	time.Sleep(time.Second) // the connections' close emits their last exchange
	nt.cmd.Process.Signal(os.Interrupt)
	nt.wait(t, 30*time.Second)
	for i := range client {
		client[i][0] = uint64(int64(client[i][0]) + monoMinusWall)
	}

	if want := fmt.Sprintf("timing requests on %s, 0 connections; server-side", addr); !strings.Contains(nt.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, nt.stderr.String())
	}
	compareWithClient(t, windowLines(t, nt.stdout.String()), client)
}

// compareWithClient checks numatrace's windows against the client's own
// measurement of the same requests (end on CLOCK_MONOTONIC, latency):
// in every window with 100 of them or more, the count within 1% and the
// p99 within 15% or 1 ms; and at least 5 such windows.
func compareWithClient(t *testing.T, windows []latencyWindow, client [][2]uint64) {
	t.Helper()
	compared := 0
	for _, w := range windows {
		var in []uint64
		for _, c := range client {
			if c[0] >= w.StartNs && c[0] < w.EndNs {
				in = append(in, c[1])
			}
		}
		if len(in) < 100 {
			continue
		}
		compared++
		got, want := w.Latency.Count, uint64(len(in))
		if math.Abs(float64(got)-float64(want)) > 0.01*float64(want) {
			t.Errorf("window %d: numatrace timed %d requests, the client %d", w.Index, got, want)
		}
		p99 := nearestRank(in, 0.99)
		if diff := math.Abs(float64(w.Latency.P99Ns) - float64(p99)); diff > 0.15*float64(p99) && diff > 1e6 {
			t.Errorf("window %d: p99 %v, the client's %v", w.Index, time.Duration(w.Latency.P99Ns), time.Duration(p99))
		}
		t.Logf("window %d: %d requests (client %d), p99 %v (client %v)", w.Index, got, want, time.Duration(w.Latency.P99Ns), time.Duration(p99))
	}
	if compared < 5 {
		t.Fatalf("only %d windows with 100 requests or more", compared)
	}
}

// respClient sends PING, GET and SET in turn on conns connections to
// redis, rate requests a second in all on a fixed schedule, until stop
// (preciseClient).
func respClient(t *testing.T, r *testutil.Redis, conns, rate int, stop <-chan struct{}) <-chan [][2]uint64 {
	return preciseClient(t, r.Port, conns, rate, stop, func(k int) []byte {
		switch k % 3 {
		case 0:
			return []byte("*1\r\n$4\r\nPING\r\n")
		case 1:
			return []byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
		}
		v := strconv.Itoa(k)
		return fmt.Appendf(nil, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%s\r\n", len(v), v)
	}, respReplyWhole)
}

// respReplyWhole says whether b holds one whole reply to PING, GET or
// SET: a simple string, or a bulk string (nil included).
func respReplyWhole(b []byte) (bool, error) {
	head, rest, ok := strings.Cut(string(b), "\r\n")
	if !ok {
		return false, nil
	}
	switch head[0] {
	case '+':
		return true, nil
	case '$':
		size, err := strconv.Atoi(head[1:])
		if err != nil {
			return false, fmt.Errorf("reply %q", head)
		}
		return size < 0 || len(rest) >= size+2, nil
	}
	return false, fmt.Errorf("reply %q", head)
}

type latencyWindow struct {
	Type    string `json:"type"`
	Index   uint64 `json:"index"`
	StartNs uint64 `json:"start_ns"`
	EndNs   uint64 `json:"end_ns"`
	Latency *struct {
		Count uint64 `json:"count"`
		P99Ns uint64 `json:"p99_ns"`
	} `json:"latency"`
}

// windowLines are the window lines of numatrace's --json output that
// carry latency.
func windowLines(t *testing.T, stdout string) []latencyWindow {
	t.Helper()
	var out []latencyWindow
	for _, l := range strings.Split(stdout, "\n") {
		var w latencyWindow
		if json.Unmarshal([]byte(l), &w) == nil && w.Type == "window" && w.Latency != nil {
			out = append(out, w)
		}
	}
	return out
}

func nearestRank(v []uint64, q float64) uint64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

// A batch job has no inbound TCP: one line says so, and the run goes on
// to a normal report with no latency in it.
func TestATargetWithoutInboundTCPSaysSoOnce(t *testing.T) {
	testutil.RequireRoot(t)
	job := exec.Command("sleep", "30")
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Process.Kill(); job.Wait() })
	nt := startAttach(t, "--pid", strconv.Itoa(job.Process.Pid), "--json", "--duration", "1s")
	nt.wait(t, 30*time.Second)
	want := fmt.Sprintf("numatrace: process %d has no inbound TCP (it listens on no port): no request latency, only the stalls\n", job.Process.Pid)
	if got := nt.stderr.String(); got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	lines := strings.Split(strings.TrimSpace(nt.stdout.String()), "\n")
	var sum map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum["type"] != "summary" {
		t.Fatalf("no summary (%v): %.300s", err, lines[len(lines)-1])
	}
	if _, ok := sum["latency"]; ok {
		t.Errorf("the summary has latency: %.300s", lines[len(lines)-1])
	}
}

// The memcg incident already under way at attach, with no latency flag:
// the requests numatrace times on redis's sockets carry its main
// thread's stalls. At least 90% of the windows whose p99, as the client
// measured it, broke the SLO while redis was frozen in memcg reclaim are
// spikes charged to memcg_reclaim, and the verdict names it, as with the
// client's log (TestRealServerIncidentUnderWay): in a 25 s run and in a
// 10 s one.
//
// This open-loop client counts each request from when it was due: the
// requests that came due while a connection waited on a frozen reply
// were slow to it though they reached redis after the freeze. numatrace
// counts them from when they were due too (pacing.go), or the client's
// spikes would be thinned to the few requests that sat in the socket.
func TestKernelSourceChargesTheIncidentUnderWay(t *testing.T) {
	const slo = 5 * uint64(time.Millisecond)
	for _, length := range []time.Duration{25 * time.Second, 10 * time.Second} {
		run := runRedisScenario(t, redisScenario{name: fmt.Sprintf("numatrace-e2e-redis-kernel-underway-%s", length),
			length: length, underWay: true, kernelLatency: true, args: []string{"--slo", "5ms"}})
		client := clientP99s(t, run)
		broke, charged, clientCalm, long, withStack := 0, 0, 0, 0, 0
		for _, w := range run.windows {
			p99, ok := client[w.index]
			if ok && p99 <= slo && run.spikeAt(w.index) != nil {
				clientCalm++ // a spike the client did not see
			}
			if !ok || p99 <= slo || w.memcgNs < 10*uint64(time.Millisecond) {
				continue
			}
			broke++
			switch sp := run.spikeAt(w.index); {
			case sp != nil && sp.Causes[0].Cause == "memcg_reclaim":
				charged++
				// A stall of 1 ms or more takes its stacks (--stacks-min's
				// default): the spike names the reclaim it was.
				if sp.Causes[0].LongestNs < uint64(time.Millisecond) {
					break
				}
				long++
				if st := sp.Causes[0].Stack; st != nil && len(st.User) > 0 &&
					slices.ContainsFunc(st.Kernel, func(f struct {
						Func string `json:"func"`
					}) bool {
						return f.Func == "try_to_free_mem_cgroup_pages"
					}) {
					withStack++
				}
			case sp != nil:
				t.Logf("%s: window %d (client p99 %v) charged elsewhere: %s", length, w.index, time.Duration(p99), sp.Verdict)
			default:
				t.Logf("%s: window %d (client p99 %v, numatrace's %v, memcg %v) is no spike", length, w.index,
					time.Duration(p99), time.Duration(w.p99), time.Duration(w.memcgNs))
			}
		}
		t.Logf("%s: %d windows whose client-measured p99 broke the SLO with redis frozen 10 ms or more, %d of them spikes charged to memcg_reclaim (%d to a stall of 1 ms or more, %d naming its stack); %d spikes where the client's p99 kept to the SLO",
			length, broke, charged, long, withStack, clientCalm)
		if long == 0 || withStack != long {
			t.Errorf("%s: %d of the %d spikes charged to a memcg_reclaim stall of 1 ms or more name the stack of redis's reclaim",
				length, withStack, long)
		}
		if !strings.Contains(run.reportProse, "where memcg_reclaim stalled (tid ") {
			t.Errorf("%s: the report's spikes do not say where memcg_reclaim stalled", length)
		}
		if broke < 1 || 10*charged < 9*broke {
			t.Errorf("%s: %d of %d windows the client saw over the SLO while redis was frozen charged to memcg_reclaim; want at least 1 window, 90%% charged",
				length, charged, broke)
		}
		if !slices.Contains(run.Correlation.ExplainedBy, "memcg_reclaim") || !strings.Contains(run.reportProse, "explained by memcg_reclaim") {
			t.Errorf("%s: the verdict does not name memcg_reclaim: %s", length, run.Correlation.Conclusion)
		}
		if !strings.Contains(run.reportProse, "requests on paced connections reached the socket late") {
			t.Errorf("%s: the report does not say which requests were counted from when they were due:\n%s", length, run.report)
		}
	}
}

// clientP99s is the p99 the client measured in each of the run's windows
// with at least 100 of its requests, by window index: its log's
// wall-clock ends placed on numatrace's CLOCK_MONOTONIC windows.
func clientP99s(t *testing.T, run *redisRun) map[uint64]uint64 {
	t.Helper()
	b, err := os.ReadFile(run.logPath)
	if err != nil {
		t.Fatal(err)
	}
	wallToMono := time.Now().UnixNano() - int64(monotonicNs())
	var lat [][2]uint64 // end (monotonic), latency
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			TsNs      int64  `json:"ts_ns"`
			LatencyNs uint64 `json:"latency_ns"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("client log: %q: %v", l, err)
		}
		lat = append(lat, [2]uint64{uint64(r.TsNs - wallToMono), r.LatencyNs})
	}
	out := map[uint64]uint64{}
	for _, w := range run.windows {
		var in []uint64
		for _, r := range lat {
			if r[0] >= w.startNs && r[0] < w.endNs {
				in = append(in, r[1])
			}
		}
		if len(in) >= 100 {
			out[w.index] = nearestRank(in, 0.99)
		}
	}
	return out
}

// gatherConns joins the results of conns connections, once all are in.
func gatherConns(results <-chan [][2]uint64, conns int) <-chan [][2]uint64 {
	all := make(chan [][2]uint64, 1)
	go func() {
		var out [][2]uint64
		for range conns {
			out = append(out, <-results...)
		}
		all <- out
	}()
	return all
}

// A closed-loop client on one connection sends its next request the
// moment the reply arrives: on the other CPU, while redis's write of that
// reply may still be returning. Both ends of the kernel's timing then
// touch the connection at once. Every exchange must still be one sample
// inside the trace: a record read while the other CPU began the next
// exchange had time 0 (7 to 28 of them in 10 s, each a WARNING that
// "latency samples lie outside the trace" on an attach with no flag).
func TestKernelTimingUnderAClosedLoopKeepsEverySample(t *testing.T) {
	testutil.RequireRoot(t)
	bench, err := exec.LookPath("redis-benchmark")
	testutil.RequireFeature(t, err == nil, "redis-benchmark is not installed")
	r := testutil.StartRedis(t)
	pinTasks(t, r.Cmd.Process.Pid, serverCPU)
	load := exec.Command("taskset", "-c", strconv.Itoa(clientCPU), bench, "-p", strconv.Itoa(r.Port),
		"-t", "set,get", "-r", "100000", "-n", "1000000000", "-c", "1", "-q")
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { load.Process.Kill(); load.Wait() })
	nt := startAttach(t, "--pid", strconv.Itoa(r.Cmd.Process.Pid), "--json", "--duration", "10s")
	nt.wait(t, 60*time.Second)

	var sum latencyCounts
	summaryOf(t, nt.stdout.Bytes(), &sum)
	li := sum.LatencyInput
	t.Logf("%d requests timed, %d outside the trace, %d late", li.Samples, li.OutsideTrace, li.LateSamples)
	if li.Samples < 50_000 {
		t.Errorf("%d requests timed in 10 s of a closed loop; want 50,000 or more", li.Samples)
	}
	if li.OutsideTrace != 0 || li.LateSamples != 0 {
		t.Errorf("%d samples outside the trace, %d late; want none", li.OutsideTrace, li.LateSamples)
	}
	for _, w := range warnings(nt.stderr.String()) {
		if strings.Contains(w, "outside the trace") {
			t.Errorf("stderr: %s", w)
		}
	}
}

// The redis memcg incident, under way as the SRE attaches with no latency
// flag, numatrace where the scheduler puts it: the slow requests' time
// went mostly to memcg reclaim (with its throttling), which the verdict's
// budget puts first, run after run; and every window's budget of its slow
// requests adds up to their latency (issue 45, (d) and (f)).
func TestTheMemcgIncidentsBudget(t *testing.T) {
	for i := range 5 {
		run := runRedisScenario(t, redisScenario{name: fmt.Sprintf("numatrace-e2e-redis-budget-%d", i),
			length: 8 * time.Second, underWay: true, kernelLatency: true, unpinned: true, args: []string{"--slo", "5ms"}})
		b := run.Correlation.Budget
		t.Logf("run %d: budget %+v; %s", i+1, b, run.Correlation.Conclusion)
		if len(b) == 0 {
			t.Fatalf("run %d: no budget: %s", i+1, run.Correlation.Conclusion)
		}
		reclaim := uint64(0)
		for _, p := range b {
			if p.Part == "memcg_reclaim" || p.Part == "reclaim_throttle" {
				reclaim += p.Ns
			}
		}
		for _, p := range b {
			if p.Part != "memcg_reclaim" && p.Part != "reclaim_throttle" && p.Ns > reclaim {
				t.Errorf("run %d: %s (%.0f%%) holds more of the slow requests' time than memcg reclaim and its throttling", i+1, p.Part, p.Share*100)
			}
		}
		if !strings.Contains(run.Correlation.Conclusion, "memcg_reclaim") {
			t.Errorf("run %d: the verdict does not name memcg_reclaim: %s", i+1, run.Correlation.Conclusion)
		}
		for _, w := range run.windows {
			if d := int64(w.budgetNs) - int64(w.slowNs); w.slowNs > 0 && (d > int64(w.slowNs)/50 || -d > int64(w.slowNs)/50) {
				t.Errorf("run %d: window %d's slow requests took %v; their budget sums to %v", i+1, w.index,
					time.Duration(w.slowNs), time.Duration(w.budgetNs))
			}
		}
	}
}
