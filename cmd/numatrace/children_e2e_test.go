package main

// Process trees as targets: a pre-forking server whose parent only
// accepts and whose children do the work, as PostgreSQL, Apache's
// prefork and gunicorn do. `attach --pid PARENT` alone must say that the
// work is in the children; `--children` must trace them, those forked
// before attach and after it, grandchildren and threads too.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// forkServer is testdata/forkserver.c running in a 64 MiB memory cgroup,
// and the connections (each served by a child process of its own) opened
// to it.
type forkServer struct {
	cmd   *exec.Cmd
	addr  string
	conns []*serverConn
}

type serverConn struct {
	c net.Conn
	r *bufio.Reader
}

func startForkServer(t *testing.T, cgroup string) *forkServer {
	t.Helper()
	_, err := exec.LookPath("gcc")
	testutil.RequireFeature(t, err == nil, "gcc not installed (make deps installs it)")
	bin := filepath.Join(t.TempDir(), "forkserver")
	if out, err := exec.Command("gcc", "-O1", "-pthread", "-o", bin, "testdata/forkserver.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	file := testutil.BigFile(t)
	// The shell joins the cgroup before it execs: the server and every
	// process it forks are charged there.
	cmd := exec.Command("sh", "-c", fmt.Sprintf("echo $$ > %s/cgroup.procs && exec %s %s", cgroup, bin, file))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &forkServer{cmd: cmd}
	t.Cleanup(func() {
		for _, c := range s.conns {
			c.c.Close()
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	var port int
	if _, err := fmt.Fscanf(bufio.NewReader(out), "port %d\n", &port); err != nil {
		t.Fatalf("forkserver did not start: %v", err)
	}
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	return s
}

// connect opens a connection: the server forks a child for it.
func (s *forkServer) connect(t *testing.T) *serverConn {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	sc := &serverConn{c: c, r: bufio.NewReader(c)}
	s.conns = append(s.conns, sc)
	return sc
}

// do sends one command and returns the reply's fields after its first word.
func (c *serverConn) do(t *testing.T, cmd, want string) []int {
	t.Helper()
	c.c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := fmt.Fprintln(c.c, cmd); err != nil {
		t.Fatal(err)
	}
	line, err := c.r.ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) < 2 || f[0] != want {
		t.Fatalf("%s: reply %q, %v", cmd, line, err)
	}
	var out []int
	for _, s := range f[1:] {
		var n int
		fmt.Sscan(s, &n)
		out = append(out, n)
	}
	return out
}

// reader is a process and thread that read the file, and so reclaimed.
type reader struct{ pid, tid int }

// serveTree runs the scenario around a numatrace started by attach once
// the server has children: connections a (a child), b (a child with a
// grandchild) and idle (a child that never reads) before attach; c, d
// (whose child reads in a second thread) and e (whose grandchild is
// forked after attach too) after it. Every process is forked before
// anything reads, and the page cache is dropped after each read, so only
// the readers ever fill the cgroup: no one else reclaims. It returns the
// server's pid and the readers, in order.
func serveTree(t *testing.T, name string, attach func(pid int)) (int, []reader) {
	t.Helper()
	cg := testutil.MemcgCgroup(t, name, 64<<20)
	testutil.DropCaches(t)
	s := startForkServer(t, cg)
	a, b, idle := s.connect(t), s.connect(t), s.connect(t)
	b.do(t, "spawn", "spawned")
	idle.do(t, "nothing", "error") // its child is up and has answered
	attach(s.cmd.Process.Pid)
	c, d, e := s.connect(t), s.connect(t), s.connect(t)
	e.do(t, "spawn", "spawned")
	var readers []reader
	for _, step := range []struct {
		conn *serverConn
		cmd  string
	}{{a, "read"}, {b, "gread"}, {c, "read"}, {d, "thread-read"}, {e, "gread"}} {
		r := step.conn.do(t, step.cmd, "read")
		readers = append(readers, reader{r[0], r[1]})
		testutil.DropCaches(t)
	}
	for _, conn := range s.conns {
		conn.c.Close()
	}
	s.conns = nil
	// Every child and grandchild exits with its connection.
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range readers {
		for time.Now().Before(deadline) {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", r.pid)); err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return s.cmd.Process.Pid, readers
}

// treeSummary is the part of the JSON summary these tests read.
type treeSummary struct {
	Type      string `json:"type"`
	Target    string `json:"target"`
	Note      string `json:"note"`
	Processes []struct {
		PID     uint32 `json:"pid"`
		Comm    string `json:"comm"`
		Threads int    `json:"threads"`
		Stalls  map[string]struct {
			Count uint64 `json:"count"`
		} `json:"stalls"`
	} `json:"processes"`
	Threads []struct {
		PID    uint32 `json:"pid"`
		TID    uint32 `json:"tid"`
		Stalls map[string]struct {
			Count uint64 `json:"count"`
		} `json:"stalls"`
	} `json:"threads"`
	Children *struct {
		Processes uint64 `json:"processes_stalled"`
		StallNs   uint64 `json:"stall_ns"`
		Stalls    map[string]struct {
			Count   uint64 `json:"count"`
			TotalNs uint64 `json:"total_ns"`
		} `json:"stalls"`
		NotWatched uint64 `json:"not_watched"`
		Hint       string `json:"hint"`
	} `json:"children"`
}

func lastSummary(t *testing.T, out string) treeSummary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var sum treeSummary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Type != "summary" {
		t.Fatalf("last line is not the summary (%v): %.300s", err, lines[len(lines)-1])
	}
	return sum
}

// --children traces the whole tree: the five readers' memcg reclaim is
// theirs, each under its own pid, from the child forked before attach to
// the grandchild forked after it; the reading thread of d is its own row;
// and no other process of the tree reclaimed. The report lists each
// process apart, with its threads.
func TestAttachChildrenTracesAForkingServer(t *testing.T) {
	var nt *attachRun
	pid, readers := serveTree(t, "numatrace-e2e-tree", func(pid int) {
		nt = startAttach(t, "--pid", fmt.Sprint(pid), "--children", "--json", "--duration", "5m")
	})
	nt.cmd.Process.Signal(os.Interrupt)
	nt.wait(t, 60*time.Second)
	sum := lastSummary(t, nt.stdout.String())
	if want := fmt.Sprintf("pid %d (forkserver) and its descendants", pid); sum.Target != want {
		t.Errorf("target %q, want %q", sum.Target, want)
	}
	if sum.Children != nil {
		t.Errorf("children traced, yet reported as untraced: %+v", sum.Children)
	}
	var wantPIDs, gotPIDs []int
	for _, r := range readers {
		wantPIDs = append(wantPIDs, r.pid)
	}
	for _, p := range sum.Processes {
		if p.Stalls["memcg_reclaim"].Count > 0 {
			gotPIDs = append(gotPIDs, int(p.PID))
		}
	}
	slices.Sort(wantPIDs)
	slices.Sort(gotPIDs)
	if !slices.Equal(gotPIDs, wantPIDs) {
		t.Errorf("processes with memcg_reclaim %v, want the readers %v (server %d)", gotPIDs, wantPIDs, pid)
	}
	var want, got []reader
	for _, r := range readers {
		want = append(want, r)
	}
	for _, th := range sum.Threads {
		if n := th.Stalls["memcg_reclaim"].Count; n > 0 {
			got = append(got, reader{int(th.PID), int(th.TID)})
			if n < 50 {
				t.Errorf("thread %d/%d: %d memcg_reclaim stalls for a 400 MiB read in 64 MiB", th.PID, th.TID, n)
			}
		}
	}
	cmp := func(a, b reader) int { return a.tid - b.tid }
	slices.SortFunc(want, cmp)
	slices.SortFunc(got, cmp)
	if !slices.Equal(got, want) {
		t.Errorf("threads with memcg_reclaim %v, want the readers %v", got, want)
	}
	// d's reader is a second thread, listed under d's pid.
	if d := readers[3]; d.pid == d.tid {
		t.Errorf("the thread-read reader %+v is its process's main thread", d)
	}
}

// --pid alone traces the server only, which stalled nothing, and says
// that its five reading child processes did, in the text report and in
// the JSON summary alike.
func TestAttachPIDHintsAtStallingChildren(t *testing.T) {
	var text, js *attachRun
	rec := filepath.Join(t.TempDir(), "hint.ntr")
	pid, readers := serveTree(t, "numatrace-e2e-hint", func(pid int) {
		text = startAttach(t, "--pid", fmt.Sprint(pid), "--duration", "5m", "--record", rec)
		js = startAttach(t, "--pid", fmt.Sprint(pid), "--json", "--duration", "5m")
	})
	for _, nt := range []*attachRun{text, js} {
		nt.cmd.Process.Signal(os.Interrupt)
		nt.wait(t, 60*time.Second)
	}
	hint := regexp.MustCompile(fmt.Sprintf(`^pid %d \(forkserver\) stalled nothing, but its %d child processes stalled \d+(\.\d+)?(µs|ms|s) in memcg_reclaim: trace them with --children \(-f\)$`,
		pid, len(readers)))
	out := text.stdout.String()
	hintLine := func(report string) string {
		for _, line := range proseLines(report) {
			if hint.MatchString(line) {
				return line
			}
		}
		return ""
	}
	found := hintLine(out) != ""
	if !found {
		t.Errorf("the text report has no line matching %s:\n%s", hint, out)
	}
	// The recording's report says it too, in the same words.
	report, err := exec.Command(binary(t), "report", rec).Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	if line := hintLine(out); line == "" || !strings.Contains(strings.Join(proseLines(string(report)), "\n"), "\n"+line+"\n") {
		t.Errorf("the recording's report lacks the live run's hint %q:\n%s", line, report)
	}
	sum := lastSummary(t, js.stdout.String())
	c := sum.Children
	if c == nil {
		t.Fatalf("no children in the JSON summary: %s", js.stdout.String())
	}
	if c.Processes != uint64(len(readers)) || !hint.MatchString(c.Hint) || c.NotWatched != 0 {
		t.Errorf("children %+v, want %d processes stalled and the hint", c, len(readers))
	}
	if m := c.Stalls["memcg_reclaim"]; m.Count < 50*uint64(len(readers)) || m.TotalNs == 0 || len(c.Stalls) != 1 || c.StallNs != m.TotalNs {
		t.Errorf("children's stalls %+v (freeze %d ns), want only memcg_reclaim, at least 50 per reader", c.Stalls, c.StallNs)
	}
	for _, th := range sum.Threads {
		if int(th.PID) != pid {
			t.Errorf("thread %d of process %d traced under --pid %d", th.TID, th.PID, pid)
		}
	}
}

// A target that exec'd is named, as it exits, after what it ran last:
// sh became sleep.
func TestExitNoteNamesTheProgramAfterExec(t *testing.T) {
	testutil.RequireRoot(t)
	sh := exec.Command("sh", "-c", "read x; exec sleep 0.2")
	gate, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sh.Process.Kill(); sh.Wait() }()
	// No latency: stderr is then the note alone (not also the line that
	// sh has no inbound TCP).
	nt := startAttach(t, "--pid", fmt.Sprint(sh.Process.Pid), "--json", "--duration", "1m", "--latency", "off")
	fmt.Fprintln(gate, "go")
	nt.wait(t, 30*time.Second)
	note := regexp.MustCompile(fmt.Sprintf(`^target pid %d \(sleep, was sh at attach\) exited after \d+(\.\d+)?m?s$`, sh.Process.Pid))
	var sum struct {
		Note string `json:"note"`
	}
	lines := strings.Split(strings.TrimSpace(nt.stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || !note.MatchString(sum.Note) {
		t.Errorf("note %q (%v), want one matching %s", sum.Note, err, note)
	}
	if got := strings.TrimSpace(nt.stderr.String()); got != "numatrace: "+sum.Note {
		t.Errorf("stderr %q, want the note", got)
	}
}

// With --children the run lasts while any process of the tree does: a
// child that outlives its parent is still traced, and the note names
// the tree when the last one goes.
func TestAttachChildrenLastsAsLongAsTheTree(t *testing.T) {
	testutil.RequireRoot(t)
	sh := exec.Command("sh", "-c", "sleep 1000 & echo $!; read x")
	gate, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sh.Process.Kill(); sh.Wait() }()
	var child int
	if _, err := fmt.Fscan(out, &child); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(child, syscall.SIGKILL)
	nt := startAttach(t, "--pid", fmt.Sprint(sh.Process.Pid), "-f", "--json", "--duration", "1m")
	fmt.Fprintln(gate, "go")
	if err := sh.Wait(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if strings.Contains(nt.stdout.String(), `"type":"summary"`) {
		t.Fatalf("the run ended with its root while child %d still runs: %s", child, nt.stdout.String())
	}
	syscall.Kill(child, syscall.SIGKILL)
	nt.wait(t, 30*time.Second)
	note := regexp.MustCompile(fmt.Sprintf(`^target pid %d \(sh\) and its descendants exited after \d+(\.\d+)?m?s$`, sh.Process.Pid))
	if sum := lastSummary(t, nt.stdout.String()); !note.MatchString(sum.Note) {
		t.Errorf("note %q, want one matching %s", sum.Note, note)
	}
}
