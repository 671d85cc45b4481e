package record

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// A run's description goes into a header and comes back out whole; a
// cause name the header has and this version does not know is left out.
func TestHeaderCarriesTheRunDescription(t *testing.T) {
	d := run.Description{Target: "pid 7 (db)", Kernel: "6.18.0", Started: time.Unix(1_764_590_000, 0).UTC(),
		StartNs: 5e9, WindowNs: 5e8, Probes: []stall.ProbeStatus{{Name: "mmap_lock", Attached: true}},
		Spikes:          run.Spikes{K: 3, FloorNs: 2e6, SLONs: 4e6, On: run.P999},
		LatencyFunction: "handle", FlightRecorder: true, Latency: run.LatencySource{Kind: run.LatencyUprobe, Detail: "calls of /bin/db:handle"}}
	d.MinEventNs[stall.MmapLock] = 10_000
	d.MinStallNs[stall.MemcgReclaim] = 1_000
	h := NewHeader(d, Host{Hostname: "db1", CPUs: 2}, "v1", nil)
	if h.Host.Kernel != "6.18.0" || h.Host.Hostname != "db1" || h.Numatrace != "v1" ||
		!reflect.DeepEqual(h.MinEventNs, map[string]uint64{"mmap_lock": 10_000}) ||
		!reflect.DeepEqual(h.MinStallNs, map[string]uint64{"memcg_reclaim": 1_000}) {
		t.Fatalf("header %+v", h)
	}
	if got := h.Run(); !reflect.DeepEqual(got, d) {
		t.Fatalf("back from the header:\n got %+v\nwant %+v", got, d)
	}
	h.MinEventNs["a_cause_from_a_newer_version"] = 1
	if got := h.Run().MinEventNs; got != d.MinEventNs {
		t.Errorf("thresholds %v, want %v", got, d.MinEventNs)
	}
}

// The latency source goes into the file's header and comes back; a
// header without one (every file before it) reads as no source, and a
// run without one writes no key.
func TestHeaderCarriesTheLatencySource(t *testing.T) {
	src := run.LatencySource{Kind: run.LatencyKernel, Detail: "requests on sockets of 0.0.0.0:6379 (2 connections at start)"}
	for _, tc := range []struct {
		src  run.LatencySource
		json string // in the header's JSON, or "" for no key
	}{
		{src, `"latency_source":{"kind":"kernel","detail":"requests on sockets of 0.0.0.0:6379 (2 connections at start)"}`},
		{run.LatencySource{}, ""},
	} {
		b, err := encodeHeader(NewHeader(run.Description{WindowNs: 1e9, Latency: tc.src}, Host{}, "v1", nil))
		if err != nil {
			t.Fatal(err)
		}
		has := bytes.Contains(b, []byte(`"latency_source"`))
		if (tc.json == "") == has || (tc.json != "" && !bytes.Contains(b, []byte(tc.json))) {
			t.Errorf("header %s, want %q", b[16:len(b)-4], tc.json)
		}
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Header().Run().Latency; got != tc.src {
			t.Errorf("read back %+v, want %+v", got, tc.src)
		}
	}
	var old Header // a 1.3 header of before the field
	if err := json.Unmarshal([]byte(`{"format":"numatrace","window_ns":1000000000,"latency_function":"handle"}`), &old); err != nil {
		t.Fatal(err)
	}
	if got := old.Run(); got.Latency != (run.LatencySource{}) || got.LatencyFunction != "handle" {
		t.Errorf("an old header reads as %+v", got)
	}
}

// --spike-on is in the header by its name, p99 (the default) by none, as
// since 1.3; a name this version does not know is judged on p99.
func TestHeaderSpikeOn(t *testing.T) {
	for _, tc := range []struct {
		on   run.Percentile
		json string // the header's key, "" for none
	}{
		{run.P99, ""}, {run.P999, `"spike_on":"p999"`}, {run.Max, `"spike_on":"max"`},
	} {
		h := NewHeader(run.Description{WindowNs: 1e9, Spikes: run.Spikes{K: 2, On: tc.on}}, Host{}, "v1", nil)
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if has := bytes.Contains(b, []byte(`"spike_on"`)); (tc.json == "") == has || !bytes.Contains(b, []byte(tc.json)) {
			t.Errorf("%v: header %s, want %q", tc.on, b, tc.json)
		}
		if got := h.Run().Spikes.On; got != tc.on {
			t.Errorf("%v: read back as %v", tc.on, got)
		}
	}
	if got := (Header{SpikeOn: "p50"}).Run().Spikes.On; got != run.P99 {
		t.Errorf("an unknown spike_on reads as %v, want p99", got)
	}
}

// docs/FORMAT.md's `latency_source` field names every kind of source a
// header can carry, so a reader of the format knows each.
func TestFormatNamesEveryLatencyKind(t *testing.T) {
	doc, err := os.ReadFile("../../docs/FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `latency_source` |") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/FORMAT.md has no row for the header's latency_source")
	}
	for _, k := range run.LatencyKinds() {
		if !strings.Contains(row, "`"+string(k)+"`") {
			t.Errorf("docs/FORMAT.md's latency_source row does not name the kind `%s`", k)
		}
	}
}
