package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// PostgreSQL (Debian's), a forking server: the postmaster listens and
// each connection is served by a backend it forks. `--pid postmaster
// --children` with no latency flag times the backends' exchanges, against
// pgbench -R's own -l log of the same transactions (select-only, simple
// protocol: one query a transaction).
func TestKernelTimesPostgresRequestsWithNoLatencyFlag(t *testing.T) {
	testutil.RequireRoot(t)
	bin := testutil.PostgresBin(t)
	pgbench := testutil.RequireTool(t, "pgbench", "postgresql")
	dir := testutil.SharedTempDir(t)
	pgPort := testutil.FreeTCPPort(t)
	port := strconv.Itoa(pgPort)
	data := filepath.Join(dir, "pg")
	testutil.StartPostgres(t, bin, data, port)
	db := []string{"-h", "127.0.0.1", "-p", port, "-U", "postgres", "postgres"}
	if out, err := exec.Command(pgbench, append([]string{"-i", "-q", "-s", "1"}, db...)...).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v: %s", err, out)
	}
	pid := testutil.PostmasterPID(t, data)
	pinTasks(t, pid, serverCPU) // the backends it forks inherit it
	nt := startAttach(t, "--pid", strconv.Itoa(pid), "--children", "--json", "--window", "1s", "--duration", "60s")
	monoMinusWall := int64(monotonicNs()) - time.Now().UnixNano()
	prefix := filepath.Join(dir, "pgbench_log")
	// pgbench runs real-time on clientCPU, as preciseClient does, so that
	// its wakeup as a reply arrives waits behind no other thread; what it
	// still waits (for the host to run its vCPU) is taken out with the
	// segments' arrivals on the loopback device.
	wire := captureWire(t, pgPort)
	softirqsAheadOfClients(t)
	cmd := exec.Command("taskset", append([]string{"-c", strconv.Itoa(clientCPU), "chrt", "-f", strconv.Itoa(clientPriority), pgbench, "-S", "-M", "simple", "-n", "-R", "800", "-c", "4", "-j", "1", "-T", "8",
		"-l", "--log-prefix", prefix}, db...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgbench: %v: %s", err, out)
	}
	// The capture's times are the wall clock's; pgbench's log is its
	// monotonic clock shifted to the wall clock's at its start.
	if moved := int64(monotonicNs()) - time.Now().UnixNano() - monoMinusWall; moved > 200_000 || moved < -200_000 {
		t.Fatalf("the wall clock moved %v against the monotonic clock during the run: the capture and pgbench's log no longer agree", -time.Duration(moved))
	}
	time.Sleep(time.Second)
	nt.cmd.Process.Signal(os.Interrupt)
	nt.wait(t, 30*time.Second)
	if want := fmt.Sprintf("timing requests on 127.0.0.1:%s", port); !strings.Contains(nt.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, nt.stderr.String())
	}
	client := pgbenchLog(t, prefix, wire.finish(t))
	first := ^uint64(0)
	for i := range client {
		client[i][0] = uint64(int64(client[i][0]) + monoMinusWall)
		first = min(first, client[i][0]-client[i][1])
	}
	// The window pgbench connected in also holds exchanges that are no
	// transaction of its log: each connection's SSL negotiation and
	// start-up, pgbench's own queries before its run. Those are timed
	// too (they are requests to the server), so that window is left out.
	var windows []latencyWindow
	for _, w := range windowLines(t, nt.stdout.String()) {
		if w.EndNs > first {
			windows = append(windows, w)
		}
	}
	if len(windows) > 0 && windows[0].StartNs <= first {
		windows = windows[1:]
	}
	compareWithClient(t, windows, client)
}

// pgbenchLog reads pgbench's -l log (one file with -j 1): each
// transaction's end (wall clock) and latency. pgbench times a transaction
// from when it began it to when it had read its reply; here it runs from
// its query's arrival at the server's socket to its reply's at pgbench's
// (wire, matched by pgbenchWire), so that pgbench's own delays, which no
// server-side timer sees, are left out. Under -R pgbench counts a
// transaction from when it was due, at Poisson times: that schedule lag
// is left out too, since on an irregular schedule when a request was due
// cannot be told from the server's side and numatrace times it from its
// arrival (pacing.go).
func pgbenchLog(t *testing.T, prefix string, wire wireTimes) [][2]uint64 {
	t.Helper()
	logs, _ := filepath.Glob(prefix + ".*")
	if len(logs) != 1 {
		t.Fatalf("pgbench logs %v, want one", logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	byClient := map[string][]pgTxn{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l) // client tx time_us script epoch_s epoch_us [lag_us]
		if len(f) < 6 {
			t.Fatalf("pgbench log line %q", l)
		}
		us, _ := strconv.ParseUint(f[2], 10, 64)
		sec, _ := strconv.ParseUint(f[4], 10, 64)
		frac, _ := strconv.ParseUint(f[5], 10, 64)
		var lag uint64
		if len(f) > 6 {
			lag, _ = strconv.ParseUint(f[6], 10, 64)
		}
		end := time.Unix(int64(sec), int64(frac)*1e3)
		due := end.Add(-time.Duration(us) * time.Microsecond)
		byClient[f[0]] = append(byClient[f[0]], pgTxn{sent: due.Add(time.Duration(min(lag, us)) * time.Microsecond), end: end})
	}
	var out [][2]uint64
	for client, txns := range byClient {
		sent, arrived := pgbenchWire(t, client, txns, wire)
		for k := range txns {
			out = append(out, [2]uint64{uint64(arrived[k].UnixNano()), uint64(arrived[k].Sub(sent[k]))})
		}
	}
	return out
}

// pgTxn is one transaction of pgbench's log, on pgbench's clock.
type pgTxn struct{ sent, end time.Time }

// pgbenchWire is when each of a pgbench client's transactions' query
// reached the server and its reply reached pgbench: its connection's
// last len(txns) exchanges on the wire (after those of its start-up,
// before any it did not log), on the client port whose exchanges fit the
// transactions' times. pgbench's clock is not the kernel's to the
// microsecond, so exchanges are matched in order, not by time; one more
// than a millisecond outside its transaction fails the match.
func pgbenchWire(t *testing.T, client string, txns []pgTxn, wire wireTimes) (sent, arrived []time.Time) {
	t.Helper()
	best, bestPort := misfit{fit: -1}, uint16(0)
	for port, segs := range wire {
		starts, ends := exchanges(segs)
		for unlogged := 0; unlogged <= 4 && len(txns)+unlogged <= len(starts); unlogged++ {
			from, to := len(starts)-len(txns)-unlogged, len(starts)-unlogged
			m := exchangesFit(starts[from:to], ends[from:to], txns)
			if m.fit == len(txns) {
				return starts[from:to], ends[from:to]
			}
			if m.fit > best.fit {
				best, bestPort = m, port
			}
		}
	}
	// What the nearest miss was says why: one transaction off, or all of
	// them by the same offset (pgbench's clock against the kernel's).
	t.Fatalf("pgbench client %s: no connection's exchanges on the loopback match its %d transactions; "+
		"nearest, port %d: %d fit, the first that does not is %d (its query left %v after pgbench began it, its reply came %v before pgbench had it)",
		client, len(txns), bestPort, best.fit, best.first, best.sentLead, best.endLead)
	return nil, nil
}

// misfit is how well a connection's exchanges fit a client's
// transactions: how many fit, and the first that does not, with its
// query's departure less when pgbench began it, and pgbench's end less
// its reply's arrival.
type misfit struct {
	fit, first        int
	sentLead, endLead time.Duration
}

// exchangesFit says how many exchanges lie within a millisecond of their
// transactions, from its send to its end.
func exchangesFit(starts, ends []time.Time, txns []pgTxn) misfit {
	m := misfit{first: -1}
	for k, x := range txns {
		if starts[k].Before(x.sent.Add(-time.Millisecond)) || ends[k].After(x.end.Add(time.Millisecond)) || ends[k].Before(starts[k]) {
			if m.first < 0 {
				m.first, m.sentLead, m.endLead = k, starts[k].Sub(x.sent), x.end.Sub(ends[k])
			}
			continue
		}
		m.fit++
	}
	return m
}

// Exchanges on the wire, paired by sequence numbers: a request of two
// segments is one, a reply of two ends at its last, even when its
// timestamp comes after the next request's, and a last request without
// a reply is none.
func TestWireExchanges(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, int64(ms)*1e6) }
	segs := []segment{
		{at: at(1), seq: 100, len: 10}, {at: at(2), seq: 110, len: 10}, // one request, 100-120
		{at: at(5), reply: true, ack: 120, seq: 7, len: 50},
		{at: at(11), reply: true, ack: 120, seq: 57, len: 5}, // its last part, stamped after the next request
		{at: at(10), seq: 120, len: 10},
		{at: at(13), reply: true, ack: 130, seq: 62, len: 5},
		{at: at(20), seq: 130, len: 5}, // the goodbye
	}
	starts, ends := exchanges(segs)
	want := [][2]int{{1, 11}, {10, 13}}
	if len(starts) != len(want) {
		t.Fatalf("%d exchanges (%v, %v), want %v", len(starts), starts, ends, want)
	}
	for k, w := range want {
		if got := [2]int{int(starts[k].UnixMilli()), int(ends[k].UnixMilli())}; got != w {
			t.Errorf("exchange %d: %v, want %v", k, got, w)
		}
	}
}
