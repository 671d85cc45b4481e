package stall

import (
	"math/rand/v2"
	"testing"
)

const ms = 1_000_000

func stalls(freeze uint64, by map[Cause]uint64) *RequestStall {
	st := &RequestStall{FreezeNs: freeze}
	for c, ns := range by {
		st.ByCause[c] = ns
	}
	return st
}

func withTimes(st *RequestStall, cpu, runq, io uint64, in [NumTimes]uint64) *RequestStall {
	st.Times = TaskTimes{Ns: [NumTimes]uint64{cpu, runq, io}, InStallNs: in}
	st.HasTimes = true
	return st
}

// A request's parts: its memory stalls, then the thread's own counters
// outside them, then the rest off a CPU.
func TestBudgetSplitsARequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		lat  uint64
		st   *RequestStall
		want map[Part]uint64
	}{
		{"no breakdown", 10 * ms, nil, map[Part]uint64{PartUnsplit: 10 * ms}},
		{"stalls without counters", 10 * ms, stalls(4*ms, map[Cause]uint64{MemcgReclaim: 4 * ms, RunqWait: 2 * ms}),
			map[Part]uint64{PartOf(MemcgReclaim): 4 * ms, PartOf(RunqWait): 2 * ms, PartUnsplit: 4 * ms}},
		{"disk-bound", 20 * ms, withTimes(stalls(0, nil), 1*ms, 2*ms, 15*ms, [NumTimes]uint64{}),
			map[Part]uint64{PartOnCPU: 1 * ms, PartOf(RunqWait): 2 * ms, PartDiskIO: 15 * ms, PartOtherWait: 2 * ms}},
		// Reclaim ran 6 ms of its 10 on a CPU, and waited 3 for I/O:
		// counted as the stall's, not again as CPU and I/O.
		{"reclaim on a CPU", 30 * ms, withTimes(stalls(10*ms, map[Cause]uint64{MemcgReclaim: 10 * ms}), 11*ms, 5*ms, 3*ms,
			[NumTimes]uint64{6 * ms, 1 * ms, 3 * ms}),
			map[Part]uint64{PartOf(MemcgReclaim): 10 * ms, PartOnCPU: 5 * ms, PartOf(RunqWait): 4 * ms, PartOtherWait: 11 * ms}},
		// A stall nested in another counts once: the causes share the
		// freeze time in proportion.
		{"nested stalls", 10 * ms, withTimes(stalls(8*ms, map[Cause]uint64{MemcgReclaim: 8 * ms, ReclaimThrottle: 8 * ms}), 0, 0, 0, [NumTimes]uint64{}),
			map[Part]uint64{PartOf(MemcgReclaim): 4 * ms, PartOf(ReclaimThrottle): 4 * ms, PartOtherWait: 2 * ms}},
		// Counters that claim more than the request had (a wait begun
		// before it) are cut in proportion.
		{"counters over the request", 10 * ms, withTimes(stalls(4*ms, map[Cause]uint64{DirectReclaim: 4 * ms}), 2*ms, 10*ms, 0, [NumTimes]uint64{}),
			map[Part]uint64{PartOf(DirectReclaim): 4 * ms, PartOnCPU: 1 * ms, PartOf(RunqWait): 5 * ms}},
		// Counted from when it was due, 12 ms before it arrived, of which
		// 10 no counters cover: not split; the disk's 15 ms are its own
		// and the wait's share of the exchange it waited behind.
		{"a wait before it arrived", 30 * ms, func() *RequestStall {
			st := withTimes(stalls(0, nil), 1*ms, 1*ms, 15*ms, [NumTimes]uint64{})
			st.UnsplitNs = 10 * ms
			return st
		}(), map[Part]uint64{PartOnCPU: 1 * ms, PartOf(RunqWait): 1 * ms, PartDiskIO: 15 * ms, PartUnsplit: 10 * ms, PartOtherWait: 3 * ms}},
	} {
		b := tc.st.Budget(tc.lat)
		var want Budget
		for p, ns := range tc.want {
			want[p] = ns
		}
		if b != want {
			t.Errorf("%s: %v, want %v", tc.name, b, want)
		}
		if b.Total() != tc.lat {
			t.Errorf("%s: parts sum to %d, want %d", tc.name, b.Total(), tc.lat)
		}
	}
}

// Whatever the counters say, the parts sum to the request's duration.
func TestBudgetSumsToTheRequest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		lat := r.Uint64N(10_000 * ms)
		st := &RequestStall{FreezeNs: r.Uint64N(lat + 1)}
		for c := range NumCauses {
			if r.IntN(3) == 0 {
				st.ByCause[c] = r.Uint64N(lat + 1)
			}
		}
		if r.IntN(2) == 0 {
			for i := range NumTimes {
				st.Times.Ns[i] = r.Uint64N(2*lat + 1)
				st.Times.InStallNs[i] = r.Uint64N(lat + 1)
			}
			st.HasTimes = true
			st.UnsplitNs = r.Uint64N(2*lat + 1)
		}
		if b := st.Budget(lat); b.Total() != lat {
			t.Fatalf("%+v in %d ns: parts %v sum to %d", st, lat, b, b.Total())
		}
	}
}

// Every part has a name that reads back, and words for people.
func TestPartNames(t *testing.T) {
	seen := map[string]bool{}
	for p := Part(0); p < NumParts; p++ {
		name := p.String()
		if c, isCause := p.Cause(); (!isCause || c.Timed()) && p.Advice() == "" {
			t.Errorf("part %s has no advice", name)
		}
		if back, ok := ParsePart(name); !ok || back != p || seen[name] || p.Words() == "" {
			t.Errorf("part %d: %q reads back as %d, %v; words %q", p, name, back, ok, p.Words())
		}
		seen[name] = true
	}
}
