package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/record"
	runpkg "github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/testutil"
)

// recordingComplete reads the recording at path to its end and fails
// unless it is whole: no damaged block, not cut short, and its end record.
func recordingComplete(t *testing.T, path string) {
	t.Helper()
	r, err := record.Open(path)
	if err != nil {
		t.Fatalf("open the recording: %v", err)
	}
	defer r.Close()
	var end *runpkg.End
	for {
		it, err := r.NextRef()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read the recording: %v", err)
		}
		if it.Kind == record.ItemEnd {
			end = it.End
		}
	}
	if end == nil || r.Truncated() || len(r.Warnings()) > 0 {
		t.Fatalf("the recording is not whole: end record %v, cut short %v, warnings %q", end != nil, r.Truncated(), r.Warnings())
	}
}

// A few task migrations, so a run has something to record.
func migrate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	exec.CommandContext(ctx, "sh", "-c", "for i in 1 2 3; do taskset -c $((i%2)) true; done").Run()
}

// SIGHUP (a dropped ssh session) ends attach and record as SIGTERM does:
// exit 0, the report printed, the recording closed whole. The shell
// passes a second SIGHUP on right after; it does not kill them while they
// finish.
func TestSIGHUPEndsTheRunLikeSIGTERM(t *testing.T) {
	for _, command := range []string{"attach", "record"} {
		t.Run(command, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "hup.ntr")
			var nt *attachRun
			if command == "attach" {
				nt = startAttach(t, "--record", rec, "--top", "10000")
			} else {
				nt = startTracing(t, "record", "-o", rec)
			}
			migrate(t)
			nt.cmd.Process.Signal(syscall.SIGHUP)
			time.Sleep(20 * time.Millisecond)
			nt.cmd.Process.Signal(syscall.SIGHUP)
			nt.wait(t, 15*time.Second) // fails unless exit 0
			recordingComplete(t, rec)
			if !strings.Contains(nt.stderr.String(), "numatrace: recorded ") {
				t.Errorf("no recording line on stderr: %q", nt.stderr.String())
			}
			if command == "record" {
				return
			}
			out := nt.stdout.String()
			if !strings.HasPrefix(out, "numatrace: system-wide for ") || !strings.Contains(out, "\nSYSTEM-WIDE") {
				t.Fatalf("no report on stdout:\n%s", out)
			}
			got, err := exec.Command(binary(t), "report", "--top", "10000", rec).Output()
			if err != nil {
				t.Fatalf("report: %v", err)
			}
			if string(got) != out {
				t.Errorf("report differs from the live text:\nlive:\n%s\nreport:\n%s", out, got)
			}
		})
	}
}

// A terminal that hangs up (its ssh session or tmux pane gone) sends
// SIGHUP, and the report can then not be written to it (EIO): the
// recording is still closed whole.
func TestHungUpTerminalKeepsTheRecording(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatalf("script (util-linux, for a pseudo-terminal): %v", err)
	}
	dir := t.TempDir()
	rec, ready := filepath.Join(dir, "hup.ntr"), filepath.Join(dir, "ready")
	keep, input, err := os.Pipe() // script's input: silence
	if err != nil {
		t.Fatal(err)
	}
	defer input.Close()
	term := exec.Command("script", "-qfec", fmt.Sprintf("exec %s attach --no-tui --ready-file %s --record %s", binary(t), ready, rec), "/dev/null")
	term.Stdin = keep
	if err := term.Start(); err != nil {
		t.Fatal(err)
	}
	keep.Close()
	t.Cleanup(func() { term.Process.Kill(); term.Wait() })
	var nt int
	for deadline := time.Now().Add(30 * time.Second); nt == 0 || !exists(ready); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("numatrace never became ready under script")
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", term.Process.Pid, term.Process.Pid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			nt, _ = strconv.Atoi(f[0])
		}
	}
	migrate(t)
	term.Process.Kill() // the kernel hangs the terminal up
	term.Wait()
	if !endsWithin(nt, 15*time.Second) {
		t.Fatal("numatrace still runs 15 s after its terminal hung up")
	}
	recordingComplete(t, rec)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// serve ends on SIGHUP as on SIGTERM: a clean exit.
func TestServeEndsOnSIGHUP(t *testing.T) {
	testutil.RequireRoot(t)
	_, serve, stderr := startServe(t)
	serve.Process.Signal(syscall.SIGHUP)
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve exited with %v: %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop on SIGHUP")
	}
}

// A paced replay stopped by Ctrl-C, SIGTERM or SIGHUP prints the report
// of what it replayed and says where it stopped, as attach does.
func TestReplayStoppedBySignalPrintsItsReport(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		cmd := exec.Command(binary(t), "replay", "--no-tui", "--speed", "1", "../../testdata/recordings/redis-memcg-hog.ntr")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		cmd.Process.Signal(sig)
		if err := cmd.Wait(); err != nil || stderr.Len() > 0 {
			t.Errorf("%v: replay ended with %v; stderr %q", sig, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		// The report says where it stopped, then ends on its verdict.
		prose := proseLines(strings.TrimSpace(stdout.String()))
		note := regexp.MustCompile(`(?m)^note: the replay was stopped [0-9.]+m?s into the recording: what follows was not replayed$`)
		if !strings.HasPrefix(lines[0], "numatrace: pid 7044 (redis-server) for ") || !note.MatchString(stdout.String()) ||
			!strings.HasPrefix(prose[len(prose)-1], "VERDICT: ") {
			t.Errorf("%v: stdout %q: want the report, saying where the replay stopped and ending on its verdict", sig, stdout.String())
		}
	}
}
