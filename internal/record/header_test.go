package record

import (
	"reflect"
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
		Spikes:          run.Spikes{K: 3, FloorNs: 2e6, SLONs: 4e6, On: "p50"},
		LatencyFunction: "handle", FlightRecorder: true}
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
