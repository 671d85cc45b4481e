package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// nobody is the unprivileged user the tests play.
var nobody = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}

// A FIFO that nobody plants at record --flight-recorder's -o, in a shared
// directory, once the recorder runs: SIGUSR1's dump refuses it in one
// line that names it, and the run ends at its --duration with its
// report. Neither a FIFO no one reads (the dump waited for a reader, and
// the run with it) nor one that nobody reads (nobody got root's
// recording) gets anything.
func TestFlightRecorderRefusesAFIFOPlantedAtItsPath(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tc := range []struct {
		name, plant string
	}{
		{"no reader", `mkfifo -m 666 "$1"`},
		// <> opens the FIFO at once: nobody reads it from then on.
		{"nobody reads", `mkfifo -m 666 "$1" && exec cat <>"$1" >"$1.got"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(sharedTempDir(t), "flight.ntr")
			const d = 4 * time.Second
			rec := startTracing(t, "record", "--json", "--flight-recorder", "8MiB", "-o", out, "--duration", d.String())
			started := time.Now()
			plant := exec.Command("sh", "-c", tc.plant, "sh", out)
			plant.SysProcAttr = nobody
			if err := plant.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { plant.Process.Kill(); plant.Wait() })
			waitForFIFO(t, out)
			if err := rec.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			rec.wait(t, d+20*time.Second) // kills and fails if it does not end
			if took := time.Since(started); took > d+10*time.Second {
				t.Errorf("the run took %s, its --duration is %s", took.Round(time.Millisecond), d)
			}
			refused := "numatrace: flight recorder: create recording: " + out + " is a named pipe, not a regular file"
			if stderr := rec.stderr.String(); !strings.Contains(stderr, refused+": not written") {
				t.Errorf("stderr:\n%s\nwant a line starting %q", stderr, refused)
			}
			lines := strings.Split(strings.TrimSpace(rec.stdout.String()), "\n")
			var sum summaryLine
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Type != "summary" {
				t.Errorf("last line of stdout %q (%v): want the summary", lines[len(lines)-1], err)
			}
			if b, err := os.ReadFile(out + ".got"); err == nil && len(b) > 0 {
				t.Errorf("nobody read %d bytes of the recording", len(b))
			}
		})
	}
}

// sharedTempDir is a directory any user may create files in, as /tmp is.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "numatrace-shared")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitForFIFO waits until path is a FIFO.
func waitForFIFO(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeNamedPipe != 0 {
			return
		}
	}
	t.Fatalf("%s never became a FIFO", path)
}
