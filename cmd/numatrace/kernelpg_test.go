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
	port := strconv.Itoa(testutil.FreeTCPPort(t))
	data := filepath.Join(dir, "pg")
	testutil.StartPostgres(t, bin, data, port)
	db := []string{"-h", "127.0.0.1", "-p", port, "-U", "postgres", "postgres"}
	if out, err := exec.Command(pgbench, append([]string{"-i", "-q", "-s", "1"}, db...)...).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v: %s", err, out)
	}
	pid := testutil.PostmasterPID(t, data)
	nt := startAttach(t, "--pid", strconv.Itoa(pid), "--children", "--json", "--window", "1s", "--duration", "60s")
	monoMinusWall := int64(monotonicNs()) - time.Now().UnixNano()
	prefix := filepath.Join(dir, "pgbench_log")
	cmd := exec.Command(pgbench, append([]string{"-S", "-M", "simple", "-n", "-R", "800", "-c", "4", "-j", "1", "-T", "8",
		"-l", "--log-prefix", prefix}, db...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgbench: %v: %s", err, out)
	}
	time.Sleep(time.Second)
	nt.cmd.Process.Signal(os.Interrupt)
	nt.wait(t, 30*time.Second)
	if want := fmt.Sprintf("timing requests on 127.0.0.1:%s", port); !strings.Contains(nt.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, nt.stderr.String())
	}
	client := pgbenchLog(t, prefix)
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
// transaction's end (wall clock) and latency, less its schedule lag under
// -R (the time it waited to be sent, which the server never saw).
func pgbenchLog(t *testing.T, prefix string) [][2]uint64 {
	t.Helper()
	logs, _ := filepath.Glob(prefix + ".*")
	if len(logs) != 1 {
		t.Fatalf("pgbench logs %v, want one", logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]uint64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l) // client tx time_us script epoch_s epoch_us [lag_us]
		if len(f) < 6 {
			t.Fatalf("pgbench log line %q", l)
		}
		us, _ := strconv.ParseUint(f[2], 10, 64)
		sec, _ := strconv.ParseUint(f[4], 10, 64)
		frac, _ := strconv.ParseUint(f[5], 10, 64)
		if len(f) > 6 {
			lag, _ := strconv.ParseUint(f[6], 10, 64)
			us -= min(lag, us)
		}
		out = append(out, [2]uint64{sec*1e9 + frac*1e3, us * 1e3})
	}
	return out
}
