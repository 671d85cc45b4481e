package stackexport

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

var (
	testStart = time.Unix(1_700_000_000, 123)
	testDur   = 10 * time.Second
)

// writeTestProfile writes the test samples and reads them back.
func writeTestProfile(t *testing.T) (*profile.Profile, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := WritePprof(&buf, testSamples(), testStart, testDur); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	p, err := profile.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return p, data
}

func TestWritePprofHeader(t *testing.T) {
	p, data := writeTestProfile(t)
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Errorf("profile is not gzipped: starts % x", data[:min(len(data), 2)])
	}
	types := []string{p.SampleType[0].Type + "/" + p.SampleType[0].Unit, p.SampleType[1].Type + "/" + p.SampleType[1].Unit}
	if want := []string{"stalls/count", "stall_time/nanoseconds"}; len(p.SampleType) != 2 || !reflect.DeepEqual(types, want) {
		t.Errorf("sample types %v, want %v", types, want)
	}
	if p.DefaultSampleType != "stall_time" {
		t.Errorf("default sample type %q", p.DefaultSampleType)
	}
	if p.TimeNanos != 1_700_000_000_000_000_123 || p.DurationNanos != 10_000_000_000 {
		t.Errorf("time %d, duration %d", p.TimeNanos, p.DurationNanos)
	}
	if p.PeriodType == nil || p.PeriodType.Type != "stall_time" || p.PeriodType.Unit != "nanoseconds" || p.Period != 1 {
		t.Errorf("period type %v, period %d", p.PeriodType, p.Period)
	}
}

func TestWritePprofSamples(t *testing.T) {
	p, _ := writeTestProfile(t)
	type sample struct {
		values      []int64
		cause, comm string
		pid, tid    int64
		frames      []string
	}
	reclaimFrames := []string{"shrink_folio_list", "try_to_free_mem_cgroup_pages", cppName, "main"}
	want := []sample{
		{[]int64{3, 1_500_000}, "memcg_reclaim", "worker-1", 100, 101, reclaimFrames},
		{[]int64{1, 2_500}, "compaction", "worker 2", 100, 102,
			[]string{"[ext4]+0xffffffffc0a01234", "compact_zone", "libc.so.6+0x9f00", "main"}},
		{[]int64{1, 400}, "memcg_reclaim", "worker-1", 100, 101, []string{"[no stack]"}},
		{[]int64{2, 500_000}, "memcg_reclaim", "worker-1", 100, 101, reclaimFrames},
		{[]int64{1, 1_499}, "compaction", "worker 2", 100, 102, []string{"[no stack]"}},
	}
	if len(p.Sample) != len(want) {
		t.Fatalf("%d samples, want %d", len(p.Sample), len(want))
	}
	for i, s := range p.Sample {
		got := sample{
			values: s.Value,
			cause:  one(s.Label["cause"]),
			comm:   one(s.Label["thread"]),
			pid:    oneNum(s.NumLabel["pid"]),
			tid:    oneNum(s.NumLabel["tid"]),
			frames: frameNames(s),
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("sample %d:\n got %+v\nwant %+v", i, got, want[i])
		}
		if proc := one(s.Label["process"]); proc != "db" {
			t.Errorf("sample %d: process %q, want db", i, proc)
		}
	}
}

func TestWritePprofLocations(t *testing.T) {
	p, _ := writeTestProfile(t)
	// Samples 0 and 3 have the same stack, so the same locations; main is
	// in both stacks.
	if !reflect.DeepEqual(p.Sample[0].Location, p.Sample[3].Location) {
		t.Error("samples with one stack do not share their locations")
	}
	if p.Sample[0].Location[3] != p.Sample[1].Location[3] {
		t.Error("main has two locations")
	}
	if len(p.Location) != 8 || len(p.Function) != 8 || len(p.Mapping) != 4 {
		t.Errorf("%d locations, %d functions, %d mappings, want 8, 8, 4", len(p.Location), len(p.Function), len(p.Mapping))
	}

	type where struct {
		address, start, limit uint64
		file, buildID         string
	}
	want := map[string]where{
		"shrink_folio_list":            {0xffffffff81234560, 0xffffffff81200010, 0xffffffff81300001, "[kernel]", ""},
		"try_to_free_mem_cgroup_pages": {0xffffffff81200010, 0xffffffff81200010, 0xffffffff81300001, "[kernel]", ""},
		"[ext4]+0x1234":                {0xffffffffc0a01234, 0xffffffffc0a01234, 0xffffffffc0a01235, "[ext4]", ""},
		cppName:                        {0x1a2b, 0, 0x1a2c, dbPath, "abc123"},
		"main":                         {0x1000, 0, 0x1a2c, dbPath, "abc123"},
		"/usr/lib/libc.so.6+0x9f00":    {0x9f00, 0, 0x9f01, libcPath, "def456"},
	}
	for _, loc := range p.Location {
		name := loc.Line[0].Function.Name
		w, ok := want[name]
		if !ok {
			continue
		}
		m := loc.Mapping
		if m == nil {
			t.Errorf("%s: no mapping", name)
			continue
		}
		got := where{loc.Address, m.Start, m.Limit, m.File, m.BuildID}
		if got != w {
			t.Errorf("%s: got %+v, want %+v", name, got, w)
		}
		if !m.HasFunctions {
			t.Errorf("%s: mapping %s without HasFunctions", name, m.File)
		}
	}
	noStack := p.Sample[2].Location[0]
	if noStack.Mapping != nil || noStack != p.Sample[4].Location[0] {
		t.Errorf("[no stack] location %+v: want one, without a mapping", noStack)
	}
}

// TestWritePprofTool checks that go tool pprof reads the profile and
// puts the kernel leaf of the longest stack first.
func TestWritePprofTool(t *testing.T) {
	_, data := writeTestProfile(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "stalls.pb.gz")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goBin, "tool", "pprof", "-top", "-sample_index=stall_time", file)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+dir, "PPROF_BINARY_PATH="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 6 && fields[5] == "shrink_folio_list" {
			// 2ms of the 2.004399ms total, all of it flat
			if want := []string{"2ms", "99.78%", "99.78%", "2ms", "99.78%"}; !reflect.DeepEqual(fields[:5], want) {
				t.Errorf("pprof -top: %q, want %q", fields[:5], want)
			}
			return
		}
	}
	t.Errorf("pprof -top has no shrink_folio_list line:\n%s", out)
}

func one(v []string) string {
	if len(v) != 1 {
		return "<" + strings.Join(v, ",") + ">"
	}
	return v[0]
}

func oneNum(v []int64) int64 {
	if len(v) != 1 {
		return -1
	}
	return v[0]
}

// frameNames is a sample's function names, leaf first.
func frameNames(s *profile.Sample) []string {
	var names []string
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			names = append(names, ln.Function.Name)
		}
	}
	return names
}
