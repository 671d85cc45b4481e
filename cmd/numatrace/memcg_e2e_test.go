package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// nextOf is the NEXT paragraph of a text report, its wrapped lines joined.
func nextOf(t *testing.T, report string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^NEXT: +(.*(?:\n {9}.*)*)`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("no NEXT in the report:\n%s", report)
	}
	return strings.Join(strings.Fields(m[1]), " ")
}

// A process reads a 400 MiB file in a 64 MiB cgroup v1 memory group,
// under attach -p and, at the same time, attach --cgroup: the report's
// next step names the group, its limit and its usage as the run ended,
// and the file that sets the limit; the recording's report says the
// same, and the JSON carries the readings behind it.
func TestNextNamesTheMemoryCgroup(t *testing.T) {
	wl := testutil.StartMemcgWorkload(t, "numatrace-e2e-next", true)
	rec := filepath.Join(t.TempDir(), "next.ntr")
	byPID := startAttach(t, "--pid", fmt.Sprint(wl.PID()), "--duration", "60s", "--record", rec)
	byGroup := startAttach(t, "--cgroup", "memory/numatrace-e2e-next", "--duration", "60s", "--json")
	wl.Release(t)
	byPID.wait(t, 30*time.Second) // the target exits with cat
	byGroup.cmd.Process.Signal(os.Interrupt)
	byGroup.wait(t, 30*time.Second)

	// The usage as the run ended: the page cache cat left stays charged
	// to the group, unless another test on the machine drops the caches
	// first; its peak (max_usage_in_bytes) stays either way.
	want := regexp.MustCompile(`^the cgroup memory/numatrace-e2e-next reached its limit \(64 MiB; usage [\d.]+ (bytes|KiB|MiB)` +
		`(, \d+% of it page cache)?(, peak \d+ MiB)?, failcnt [1-9][\d,]*( \(\+[\d,]+ over the run\))?\): ` +
		`raise memory\.limit_in_bytes, or cut what fills it \(page cache counts against the limit\)$`)
	live := nextOf(t, byPID.stdout.String())
	if !want.MatchString(live) {
		t.Fatalf("attach -p: next step\n%q\ndoes not name the group, its limit and usage:\n%s", live, byPID.stdout.String())
	}
	got, err := exec.Command(binary(t), "report", rec).Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	if again := nextOf(t, string(got)); again != live {
		t.Errorf("the recording's next step differs from the live run's:\nlive:   %q\nreport: %q", live, again)
	}

	parseNDJSON(t, byGroup.stdout.Bytes()) // every line JSON, the summary last
	lines := strings.Split(strings.TrimSpace(byGroup.stdout.String()), "\n")
	var sum struct {
		Headline struct {
			Next string `json:"next"`
		} `json:"headline"`
		MemoryCgroup struct {
			Start, End *memcgJSON
		} `json:"memory_cgroup"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatal(err)
	}
	if !want.MatchString(sum.Headline.Next) {
		t.Errorf("attach --cgroup: next step %q", sum.Headline.Next)
	}
	for name, r := range map[string]*memcgJSON{"start": sum.MemoryCgroup.Start, "end": sum.MemoryCgroup.End} {
		if r == nil || r.Group != "memory/numatrace-e2e-next" || r.Version != 1 || r.LimitBytes != 64<<20 {
			t.Errorf("JSON memory_cgroup.%s: %+v", name, r)
		}
	}
	if e := sum.MemoryCgroup.End; e != nil && (e.PeakBytes < 60<<20 || e.Failcnt == 0) {
		t.Errorf("JSON memory_cgroup.end: peak %d, failcnt %d: the reader did not fill the group", e.PeakBytes, e.Failcnt)
	}
}

// memcgJSON is what the test reads of a memory cgroup reading in the JSON.
type memcgJSON struct {
	Group      string `json:"group"`
	Version    int    `json:"version"`
	LimitBytes uint64 `json:"limit_bytes"`
	PeakBytes  uint64 `json:"peak_bytes"`
	Failcnt    uint64 `json:"failcnt"`
}
