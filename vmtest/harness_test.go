package vmtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

var runVM = flag.Bool("vm", false, "boot the two-node guests (make vmtest)")

// requireVM skips unless -vm is given; make test and make vmtest give it.
func requireVM(t *testing.T) {
	t.Helper()
	testutil.OptIn(t, *runVM, "guest tests run with -vm (make vmtest, part of make test)")
	_, err := exec.LookPath("qemu-system-x86_64")
	testutil.RequireFeature(t, err == nil, "qemu-system-x86_64 not installed (make deps installs it)")
}

func cacheDir() string {
	if d := os.Getenv("NUMATRACE_VMTEST_CACHE"); d != "" {
		return d
	}
	abs, _ := filepath.Abs("cache")
	return abs
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds numatrace and ntguest as static binaries, once.
func binaries(t *testing.T) (numatrace, ntguest string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "numatrace-vm")
		if buildErr != nil {
			return
		}
		for pkg, out := range map[string]string{"../cmd/numatrace": "numatrace", "./guest": "ntguest"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, out), pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v: %s", pkg, err, b)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "numatrace"), filepath.Join(binDir, "ntguest")
}

// guestRun is one boot of one kernel and what its scenarios reported.
type guestRun struct {
	Kernel  Kernel
	Lines   []Line
	Console string
	Results map[string]json.RawMessage
	Errors  []string
}

// boot prepares kernel k and runs scenarios in one guest.
func boot(t *testing.T, k Kernel, scenarios []string, limit time.Duration) *guestRun {
	t.Helper()
	nt, guest := binaries(t)
	ex, err := Cache{Dir: cacheDir()}.Extract(k)
	if err != nil {
		t.Fatalf("kernel %s: %v", k.Name, err)
	}
	initrd := filepath.Join(t.TempDir(), "initrd.gz")
	if err := Initramfs(initrd, guest, nt, ex.Brd); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// A CPU stuck in the kernel panics the guest at once, with every
	// CPU's backtrace, instead of holding the run to its deadline.
	extra := []string{"softlockup_panic=1", "softlockup_all_cpu_backtrace=1"}
	if updateRecordings() {
		extra = append(extra, "nt.record=1")
	}
	lines, console, err := Guest{Kernel: k, Vmlinuz: ex.Vmlinuz, Initrd: initrd, Scenarios: scenarios,
		Limit: limit, Args: extra}.Boot(context.Background())
	t.Logf("kernel %s: guest ran %s; scenarios finished: %s", k.Name, time.Since(start).Round(time.Second), finished(lines))
	r := &guestRun{Kernel: k, Lines: lines, Console: console, Results: map[string]json.RawMessage{}}
	for _, l := range lines {
		switch l.Kind {
		case "NTRESULT":
			var head struct{ Scenario string }
			json.Unmarshal(l.Body, &head)
			r.Results[head.Scenario] = l.Body
		case "NTERROR":
			r.Errors = append(r.Errors, string(l.Body))
		case "NTFILE":
			saveRecording(t, k, l.Body)
		}
	}
	if sign := lockupSigns.FindString(console); sign != "" {
		// The kernel's own report: where each CPU was (see LOCKUP.md).
		i := strings.Index(console, sign)
		t.Fatalf("kernel %s: the guest kernel reported %q (%v):\n%s", k.Name, sign, err, console[max(0, i-200):min(len(console), i+12000)])
	}
	if err != nil {
		// What the guest said went wrong (a stuck command's stacks) first,
		// and how far it got: a guest slowed down past its deadline has
		// finished scenarios in their usual times, a hung one has not.
		t.Fatalf("kernel %s: %v\nscenarios finished: %s\nguest errors:\n%s\nconsole tail:\n%s", k.Name, err,
			finished(lines), strings.Join(r.Errors, "\n"), tail(console, 3000))
	}
	return r
}

// finished lists the scenarios a guest reported, in order, each with its
// time in the guest.
func finished(lines []Line) string {
	var done []string
	for _, l := range lines {
		if l.Kind != "NTRESULT" {
			continue
		}
		var head struct {
			Scenario string
			WallMs   int64 `json:"wall_ms"`
		}
		json.Unmarshal(l.Body, &head)
		done = append(done, fmt.Sprintf("%s (%.1fs)", head.Scenario, float64(head.WallMs)/1000))
	}
	if len(done) == 0 {
		return "none"
	}
	return strings.Join(done, ", ")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// updateRecordings: NUMATRACE_UPDATE_RECORDINGS=1 make vmtest refreshes the
// sample recordings in testdata/recordings from the guests.
func updateRecordings() bool { return os.Getenv("NUMATRACE_UPDATE_RECORDINGS") != "" }

func saveRecording(t *testing.T, k Kernel, body json.RawMessage) {
	t.Helper()
	var f struct {
		Scenario string `json:"scenario"`
		B64      string `json:"b64"`
	}
	if err := json.Unmarshal(body, &f); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(f.B64)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "testdata", "recordings", fmt.Sprintf("vm-%s-%s.ntr", k.Name, f.Scenario))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(b))
}
