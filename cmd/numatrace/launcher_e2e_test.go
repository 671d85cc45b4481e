package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// A target started through a launcher that execs (setpriv, sudo, env,
// nice) is looked up as the launcher if it had not exec'd yet; once
// numatrace attached it had. The note as it exits names it as it was at
// attach, not the launcher ("cat, was setpriv at attach"). The test
// holds numatrace between the look-up and the attach (stopped as its
// first BPF object appears) while the launcher execs.
func TestExitNoteDoesNotNameTheLauncher(t *testing.T) {
	testutil.RequireRoot(t)
	launcher := filepath.Join(sharedTempDir(t), "setpriv") // its name is the process's until it execs
	if err := os.Symlink("/bin/sh", launcher); err != nil {
		t.Fatal(err)
	}
	target := exec.Command(launcher, "-c", "read x; exec cat")
	target.SysProcAttr = nobody
	gate, err := target.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { target.Process.Kill(); target.Wait() }()
	pid := target.Process.Pid
	nt := &attachRun{ready: filepath.Join(t.TempDir(), "ready")}
	nt.cmd = exec.Command(binary(t), "attach", "--no-tui", "--json", "--latency", "off", "--ready-file", nt.ready,
		"--pid", fmt.Sprint(pid), "--duration", "1m")
	nt.cmd.Stdout, nt.cmd.Stderr = &nt.stdout, &nt.stderr
	if err := nt.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nt.cmd.Process.Kill(); nt.cmd.Wait() })

	holdWhileLoading(t, nt, func() {
		fmt.Fprintln(gate, "go")
		waitFor(t, "the launcher to exec cat", func() bool { return comm(pid) == "cat" })
	})
	waitFor(t, "numatrace to attach", func() bool { _, err := os.Stat(nt.ready); return err == nil })
	gate.Close() // cat ends
	nt.wait(t, 30*time.Second)
	note := regexp.MustCompile(fmt.Sprintf(`^target pid %d \(cat\) exited after \d+(\.\d+)?m?s$`, pid))
	var sum summaryLine
	lines := strings.Split(strings.TrimSpace(nt.stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || !note.MatchString(sum.Note) {
		t.Errorf("note %q (%v), want one matching %s", sum.Note, err, note)
	}
}

// holdWhileLoading stops numatrace as soon as it makes its first BPF
// object (it has looked the target up, and is loading its probes), runs
// f, and lets it go on.
func holdWhileLoading(t *testing.T, nt *attachRun, f func()) {
	t.Helper()
	fds := fmt.Sprintf("/proc/%d/fd", nt.cmd.Process.Pid)
	waitFor(t, "numatrace's first BPF object", func() bool {
		ents, _ := os.ReadDir(fds)
		for _, e := range ents {
			if l, _ := os.Readlink(filepath.Join(fds, e.Name())); strings.HasPrefix(l, "anon_inode:bpf") {
				return true
			}
		}
		return false
	})
	if err := nt.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer nt.cmd.Process.Signal(syscall.SIGCONT)
	if _, err := os.Stat(nt.ready); err == nil {
		t.Fatal("numatrace had attached already when it was stopped: a machine too loaded for this test")
	}
	f()
}

// comm is a process's name, "" if it is gone.
func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// waitFor polls cond every millisecond, for 30 s at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}
