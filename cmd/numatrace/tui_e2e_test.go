package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/numatrace/numatrace/internal/testutil"
)

// tmuxSession runs command in a detached tmux terminal of the given size,
// as a user would see it. The pane stays after the command exits and
// prints its exit status. Each session has a server of its own, on a
// socket in the test's directory: one that a test before ended as it went
// is never reused.
type tmuxSession struct{ name, socket string }

// tmux is a tmux command to the session's server.
func (s *tmuxSession) tmux(args ...string) *exec.Cmd {
	return exec.Command("tmux", append([]string{"-S", s.socket}, args...)...)
}

func startTmux(t *testing.T, w, h int, command string) *tmuxSession {
	t.Helper()
	_, err := exec.LookPath("tmux")
	testutil.RequireFeature(t, err == nil, "tmux not installed (make deps installs it)")
	s := &tmuxSession{name: fmt.Sprintf("nt%d", time.Now().UnixNano()), socket: filepath.Join(t.TempDir(), "tmux")}
	cmd := s.tmux("new-session", "-d", "-s", s.name, "-x", fmt.Sprint(w), "-y", fmt.Sprint(h),
		command+"; echo EXIT=$?; sleep 600")
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { s.tmux("kill-server").Run() })
	return s
}

func (s *tmuxSession) capture(t *testing.T) string {
	out, err := s.tmux("capture-pane", "-p", "-J", "-t", s.name).Output() // -J: a wrapped line as one
	if err != nil {
		t.Fatalf("capture-pane: %v", err)
	}
	return string(out)
}

func (s *tmuxSession) keys(t *testing.T, keys ...string) {
	if out, err := s.tmux(append([]string{"send-keys", "-t", s.name}, keys...)...).CombinedOutput(); err != nil {
		t.Fatalf("send-keys: %v: %s", err, out)
	}
}

// waitFor polls the screen until every want is on it.
func (s *tmuxSession) waitFor(t *testing.T, d time.Duration, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		screen := s.capture(t)
		missing := ""
		for _, w := range want {
			if !strings.Contains(screen, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return screen
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q never showed; the screen:\n%s", missing, screen)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// paneTitle is the title the programs in the pane set (OSC 0 or 2).
func (s *tmuxSession) paneTitle(t *testing.T) string {
	out, err := s.tmux("display-message", "-p", "-t", s.name, "#{pane_title}").Output()
	if err != nil {
		t.Fatalf("display-message: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// The reader's name clears the screen and retitles the terminal when
// printed raw (any user can name a thread so, with prctl(PR_SET_NAME)):
// the view shows it escaped, its header stays, and the title is left.
const tuiHostileComm = "\x1b[2J\x1b]0;pwned\x07"

func TestTUILiveAttachInATerminal(t *testing.T) {
	reader := filepath.Join(t.TempDir(), tuiHostileComm)
	if err := os.Symlink("/bin/cat", reader); err != nil {
		t.Fatal(err)
	}
	shown := `\x1b[2J\x1b]0;pwned\x07`
	wl := testutil.StartMemcgReader(t, "numatrace-e2e-tui", true, reader)
	ready := filepath.Join(t.TempDir(), "ready")
	s := startTmux(t, 80, 24, fmt.Sprintf("%s attach --pid %d --ready-file %s", binary(t), wl.PID(), ready))
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready; the screen:\n%s", s.capture(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.waitFor(t, 5*time.Second, "numatrace LIVE", " Overview ")
	title := s.paneTitle(t)
	wl.Release(t)
	// The reader exits: its stalls stay on screen, and the header says why
	// tracing stopped. COMM is 15 wide.
	screen := s.waitFor(t, 30*time.Second, "STOPPED: the target exited", "memcg tot/max", fmt.Sprintf("%d %s", wl.PID(), shown[:15]))
	t.Logf("80x24 live screen:\n%s", screen)
	if !strings.HasPrefix(screen, "numatrace STOPPED: the target exited") {
		t.Errorf("the header is gone:\n%s", screen)
	}
	s.keys(t, "Enter")
	s.waitFor(t, 5*time.Second, "› thread", "HISTOGRAMS", "memcg_reclaim:", fmt.Sprintf("tid %d (%s) of pid %d", wl.PID(), shown, wl.PID()))
	s.keys(t, "Escape")
	time.Sleep(300 * time.Millisecond)
	s.keys(t, "q")
	// After the view, the text report stays in the terminal, wrapped to it.
	s.waitFor(t, 10*time.Second, "EXIT=0", "note: target pid", "("+shown) // the note names the target, escaped
	out := s.captureAll(t)
	if first, last := strings.Index(out, "\nVERDICT:"), strings.LastIndex(out, "\nVERDICT:"); first < 0 || last <= first {
		t.Errorf("no report, verdict first and last:\n%s", out)
	} else {
		fitsPane(t, out[first:last+strings.Index(out[last+1:], "\n")+1], 80)
	}
	if got := s.paneTitle(t); got != title {
		t.Errorf("the pane's title changed from %q to %q", title, got)
	}
}

func TestTUIReplayInATerminal(t *testing.T) {
	s := startTmux(t, 200, 50, binary(t)+" replay ../../testdata/recordings/redis-memcg-hog.ntr")
	s.waitFor(t, 10*time.Second, "numatrace REPLAY 0:31/0:31", "redis-server", "▲")
	s.keys(t, "Tab")
	s.waitFor(t, 5*time.Second, "explained by memcg_reclaim", "P99 ")
	s.keys(t, "Home")
	s.waitFor(t, 5*time.Second, "REPLAY 0:00/0:31")
	s.keys(t, "Space")
	s.waitFor(t, 5*time.Second, "REPLAY 0:02/0:31 ▶") // plays at the recorded pace
	s.keys(t, "C-c")
	s.waitFor(t, 5*time.Second, "EXIT=0")
}

// The replay view quits on SIGHUP, as on SIGTERM, rather than dying with
// the terminal left in its alternate screen.
func TestTUIReplayQuitsOnSIGHUP(t *testing.T) {
	s := startTmux(t, 200, 50, binary(t)+" replay ../../testdata/recordings/redis-memcg-hog.ntr")
	s.waitFor(t, 10*time.Second, "numatrace REPLAY 0:31/0:31")
	out, err := s.tmux("display-message", "-p", "-t", s.name, "#{pane_pid}").Output()
	if err != nil {
		t.Fatalf("display-message: %v", err)
	}
	shell := strings.TrimSpace(string(out))
	b, _ := os.ReadFile("/proc/" + shell + "/task/" + shell + "/children")
	nt, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("numatrace's pid from %q: %v", b, err)
	}
	syscall.Kill(nt, syscall.SIGHUP)
	s.waitFor(t, 5*time.Second, "EXIT=0")
}

// captureAll is the pane with its scrollback, wrapped lines joined.
func (s *tmuxSession) captureAll(t *testing.T) string {
	out, err := s.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", s.name).Output()
	if err != nil {
		t.Fatalf("capture-pane: %v", err)
	}
	return string(out)
}

// fitsPane checks that text, captured with its wrapped lines joined,
// has no line the terminal had to wrap.
func fitsPane(t *testing.T, text string, cols int) {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if w := ansi.StringWidth(l); w > cols {
			t.Errorf("a line of %d columns in a %d-column pane: %q", w, cols, l)
		}
	}
}

// Quitting replay's view prints the recording's report, verdict first,
// as the README's Quick start and `make demo` say, wrapped to the pane.
func TestTUIReplayQuitPrintsTheReport(t *testing.T) {
	const rec = "../../testdata/recordings/redis-memcg-hog.ntr"
	s := startTmux(t, 80, 24, binary(t)+" replay "+rec)
	s.waitFor(t, 10*time.Second, "numatrace REPLAY 0:31/0:31", "redis-server")
	s.keys(t, "q")
	s.waitFor(t, 10*time.Second, "EXIT=0")
	out := s.captureAll(t)
	out = out[:strings.Index(out, "EXIT=0")]
	verdict, threads := strings.Index(out, "VERDICT: 23 spikes in 61 windows"), strings.Index(out, "THREADS (")
	if verdict < 0 || threads < verdict || !strings.Contains(out, "\nNEXT:") {
		t.Fatalf("quitting the view printed no report, verdict first:\n%s", out)
	}
	fitsPane(t, out, 80)
	_, want, _ := runCLI("report", rec)
	if got := strings.Join(strings.Fields(out[strings.Index(out, "numatrace: "):]), " "); got != strings.Join(strings.Fields(want), " ") {
		t.Errorf("the report after the view is not `numatrace report`'s:\n%s\nwant\n%s", out, want)
	}
}

// The text report wraps to a pane narrower than 100 columns.
func TestReportFitsAnEightyColumnPane(t *testing.T) {
	s := startTmux(t, 80, 24, binary(t)+" report ../../testdata/recordings/redis-memcg-hog.ntr")
	s.waitFor(t, 10*time.Second, "EXIT=0")
	out := s.captureAll(t)
	if !strings.Contains(out, "VERDICT:") {
		t.Fatalf("no report:\n%s", out)
	}
	fitsPane(t, out[:strings.Index(out, "EXIT=0")], 80)
}
