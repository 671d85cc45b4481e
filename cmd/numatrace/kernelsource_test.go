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
	addr := fmt.Sprintf("127.0.0.1:%d", r.Port)
	nt := startAttach(t, "--pid", strconv.Itoa(r.Cmd.Process.Pid), "--json", "--window", "1s", "--duration", "60s")
	// The client's wall-clock end times, on numatrace's CLOCK_MONOTONIC.
	monoMinusWall := int64(monotonicNs()) - time.Now().UnixNano()
	stop := make(chan struct{})
	done := respClient(t, r, 4, 1000, stop)
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
	compared := 0
	for _, w := range windowLines(t, nt.stdout.String()) {
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

// respClient sends PING, GET and SET in turn on conns connections, rate
// requests a second in all on a fixed schedule, until stop; it yields
// each request's end (wall clock) and latency, from its write to its
// reply's end: what a client's own histogram would hold.
func respClient(t *testing.T, r *testutil.Redis, conns, rate int, stop <-chan struct{}) <-chan [][2]uint64 {
	t.Helper()
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	results := make(chan [][2]uint64, conns)
	for c := 0; c < conns; c++ {
		conn, err := r.Dial()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer conn.Close()
			var out [][2]uint64
			defer func() { results <- out }()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Until(start.Add(time.Duration(k*conns+c) * interval))):
				}
				cmd := [][]string{{"PING"}, {"GET", "k"}, {"SET", "k", strconv.Itoa(k)}}[k%3]
				sent := time.Now()
				if _, err := conn.Do(cmd...); err != nil {
					t.Errorf("redis %v: %v", cmd, err)
					return
				}
				end := time.Now()
				out = append(out, [2]uint64{uint64(end.UnixNano()), uint64(end.Sub(sent))})
			}
		}()
	}
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
// thread's stalls, and the verdict names memcg_reclaim.
func TestKernelSourceChargesTheIncidentUnderWay(t *testing.T) {
	run := runRedisScenario(t, redisScenario{name: "numatrace-e2e-redis-kernel-underway",
		length: 15 * time.Second, underWay: true, kernelLatency: true, args: []string{"--slo", "5ms"}})
	if !slices.Contains(run.Correlation.ExplainedBy, "memcg_reclaim") || !strings.Contains(run.report, "explained by memcg_reclaim") {
		t.Errorf("the verdict does not name memcg_reclaim: %s", run.Correlation.Conclusion)
	}
}
