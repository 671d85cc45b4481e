//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/numatrace/numatrace/internal/stall"
)

// Snapshot copies the kernel's exact per-thread histograms, migration
// counts and system counters.
func (t *Tracer) Snapshot() (*stall.Snapshot, error) {
	s := &stall.Snapshot{Threads: map[uint32]*stall.ThreadStats{}}
	// The counters and the totals by cause first, the threads after: a
	// stall or histogram that comes meanwhile is then in the threads
	// only, which can hide an eviction for one reading but never make up
	// one that did not happen.
	c, err := t.counters()
	if err != nil {
		return nil, err
	}
	if s.CauseTotals, err = t.causeTotals(); err != nil {
		return nil, err
	}
	if t.watching() {
		if s.Descendants, err = t.descendants(c); err != nil {
			return nil, err
		}
	}
	if err := t.readHists(s); err != nil {
		return nil, err
	}
	if err := t.readMigrationCounts(s); err != nil {
		return nil, err
	}
	refreshComms(s, "/proc")
	addCounters(s, c)
	return s, nil
}

// readHists copies every thread's histograms by cause, and how full
// their map is.
func (t *Tracer) readHists(s *stall.Snapshot) error {
	var (
		hk typesHistKey
		hv typesHist
	)
	it := t.maps.Hists.Iterate()
	for it.Next(&hk, &hv) {
		if hk.Cause >= uint32(stall.NumCauses) {
			continue
		}
		th := s.Thread(hv.Pid, hk.Tid, cString(hv.Comm[:]))
		if th.Hists[stall.Cause(hk.Cause)] == nil { // a walk of a changing map may see a key twice
			s.HistEntries++
		}
		h := &stall.Hist{Count: hv.Count, TotalNs: hv.TotalNs, MaxNs: hv.MaxNs, NestedNs: hv.NestedNs}
		copy(h.Slots[:], hv.Slots[:])
		th.Hists[stall.Cause(hk.Cause)] = h
	}
	if err := iterErr(it, "hists"); err != nil {
		return err
	}
	s.HistCapacity = int(t.maps.Hists.MaxEntries())
	return nil
}

// readMigrationCounts gives each thread its migrations since attach and its
// cross-node ones: live threads' from the iterator where it runs, the
// rest (and the cross-node counts) from thread_counts_map.
func (t *Tracer) readMigrationCounts(s *stall.Snapshot) error {
	live := map[uint32]bool{}
	if t.migrIter != nil {
		var err error
		if live, err = t.liveMigrations(s); err != nil {
			return err
		}
	}
	var (
		tid uint32
		tc  typesThreadCounts
	)
	it := t.maps.ThreadCountsMap.Iterate()
	for it.Next(&tid, &tc) {
		migr := tc.Migrations
		if t.migrIter != nil {
			// The count an exited thread left; a live one's is the iterator's.
			migr = 0
			if !live[tid] {
				migr = t.sinceAttach(tid, tc.StartNs, tc.Migrations)
			}
		}
		if migr == 0 && tc.CrossNode == 0 {
			continue
		}
		th := s.Thread(tc.Pid, tid, cString(tc.Comm[:]))
		if migr > 0 {
			th.Migrations = migr
		}
		th.CrossNodeMigrations = tc.CrossNode
	}
	return iterErr(it, "thread_counts")
}

// liveMigrations runs the migrations iterator: every live traced thread's
// migrations since attach, and which threads it saw.
func (t *Tracer) liveMigrations(s *stall.Snapshot) (map[uint32]bool, error) {
	recs, err := t.readMigrations()
	if err != nil {
		return nil, err
	}
	live := map[uint32]bool{}
	for _, r := range recs {
		live[r.Tid] = true
		if n := t.sinceAttach(r.Tid, r.StartNs, r.NrMigrations); n > 0 {
			s.Thread(r.Pid, r.Tid, cString(r.Comm[:])).Migrations = n
		}
	}
	return live, nil
}

// addCounters fills in what the system-wide counters say: lost records,
// the kernel threads' work, and the histograms the LRU evicted.
func addCounters(s *stall.Snapshot, c counterValues) {
	s.LostPerCPU = c.perCPU[typesCounterIdCOUNTER_LOST_EVENTS]
	s.LostEvents = c.sum(typesCounterIdCOUNTER_LOST_EVENTS)
	s.System = stall.SystemStats{
		KswapdWakeups:         c.sum(typesCounterIdCOUNTER_KSWAPD_WAKEUPS),
		KhugepagedCollapses:   c.sum(typesCounterIdCOUNTER_KHUGEPAGED_COLLAPSES),
		KhugepagedCollapsedOK: c.sum(typesCounterIdCOUNTER_KHUGEPAGED_COLLAPSED_OK),
		KcompactdPasses:       c.sum(typesCounterIdCOUNTER_KCOMPACTD_PASSES),
		KcompactdNs:           c.sum(typesCounterIdCOUNTER_KCOMPACTD_NS),
		ProactivePasses:       c.sum(typesCounterIdCOUNTER_PROACTIVE_PASSES),
		ProactiveNs:           c.sum(typesCounterIdCOUNTER_PROACTIVE_NS),
		DirectCompactAttempts: c.sum(typesCounterIdCOUNTER_DIRECT_COMPACT_ATTEMPTS),
		TargetsFull:           c.sum(typesCounterIdCOUNTER_TARGETS_FULL),
		StacksTaken:           c.sum(typesCounterIdCOUNTER_STACKS_TAKEN),
		KernelStacksLost:      c.sum(typesCounterIdCOUNTER_KSTACK_LOST),
		UserStacksLost:        c.sum(typesCounterIdCOUNTER_USTACK_LOST),
	}
	// Entries made, less those still there: the LRU evicted the rest.
	if made := c.sum(typesCounterIdCOUNTER_HIST_NEW); made > uint64(s.HistEntries) {
		s.HistEvicted = made - uint64(s.HistEntries)
	}
}

// causeTotals adds up the exact per-cause totals over CPUs.
func (t *Tracer) causeTotals() (map[stall.Cause]*stall.Hist, error) {
	m := map[stall.Cause]*stall.Hist{}
	var perCPU []typesHist
	for c := stall.Cause(0); c < stall.NumCauses; c++ {
		if err := t.maps.CauseTotals.Lookup(uint32(c), &perCPU); err != nil {
			return nil, fmt.Errorf("read cause_totals: %w", err)
		}
		h := &stall.Hist{}
		for _, v := range perCPU {
			h.Count += v.Count
			h.TotalNs += v.TotalNs
			h.NestedNs += v.NestedNs
			h.MaxNs = max(h.MaxNs, v.MaxNs)
			for i := range h.Slots {
				h.Slots[i] += v.Slots[i] // a CPU's may have wrapped; the sum has not
			}
		}
		if h.Count > 0 || h.TotalNs > 0 {
			m[c] = h
		}
	}
	return m, nil
}

// descendants reads what the watched descendants stalled: those gone
// (counted as they exited, in c, read before the map) and those alive.
func (t *Tracer) descendants(c counterValues) (*stall.Descendants, error) {
	d := &stall.Descendants{Stalled: c.sum(typesCounterIdCOUNTER_WATCHED_GONE),
		NotWatched: c.sum(typesCounterIdCOUNTER_WATCHED_FULL), Causes: map[stall.Cause]stall.StallTime{}}
	var (
		pid     uint32
		stalled uint8
	)
	it := t.maps.WatchedTgids.Iterate()
	for it.Next(&pid, &stalled) {
		if stalled != 0 {
			d.Stalled++
		}
	}
	if err := iterErr(it, "watched_tgids"); err != nil {
		return nil, err
	}
	var perCPU []typesChildTotal
	for c := stall.Cause(0); c < stall.NumCauses; c++ {
		if err := t.maps.ChildTotals.Lookup(uint32(c), &perCPU); err != nil {
			return nil, fmt.Errorf("read child_totals: %w", err)
		}
		var st stall.StallTime
		for _, v := range perCPU {
			st.Count += v.Count
			st.TotalNs += v.TotalNs
			st.NestedNs += v.NestedNs
		}
		if st.Count > 0 || st.TotalNs > 0 {
			d.Causes[c] = st
		}
	}
	return d, nil
}

// LostEvents is the number of records the kernel could not reserve.
func (t *Tracer) LostEvents() (uint64, error) {
	vals, err := t.counter(typesCounterIdCOUNTER_LOST_EVENTS)
	if err != nil {
		return 0, err
	}
	return total(vals), nil
}

type counterValues struct {
	perCPU map[typesCounterId][]uint64
}

func (c counterValues) sum(id typesCounterId) uint64 { return total(c.perCPU[id]) }

// total adds up a counter's per-CPU values.
func total(vals []uint64) uint64 {
	var n uint64
	for _, v := range vals {
		n += v
	}
	return n
}

func (t *Tracer) counters() (counterValues, error) {
	c := counterValues{perCPU: map[typesCounterId][]uint64{}}
	for id := typesCounterId(0); id < typesCounterIdCOUNTER_MAX; id++ {
		vals, err := t.counter(id)
		if err != nil {
			return c, err
		}
		c.perCPU[id] = vals
	}
	return c, nil
}

// counter reads one counter's per-CPU values.
func (t *Tracer) counter(id typesCounterId) ([]uint64, error) {
	var vals []uint64
	if err := t.maps.Counters.Lookup(uint32(id), &vals); err != nil {
		return nil, fmt.Errorf("read counter %d: %w", id, err)
	}
	return vals, nil
}

func iterErr(it *ebpf.MapIterator, name string) error {
	if err := it.Err(); err != nil && !errors.Is(err, ebpf.ErrIterationAborted) {
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}

// refreshComms renames threads that still exist after their current
// comm: the kernel records a thread's name at its first stall, which is
// stale once it execs or renames itself.
func refreshComms(s *stall.Snapshot, procRoot string) {
	for tid, th := range s.Threads {
		b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(int(th.PID)), "task", strconv.Itoa(int(tid)), "comm"))
		if err == nil {
			th.Comm = strings.TrimSuffix(string(b), "\n")
		}
	}
}
