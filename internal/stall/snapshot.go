package stall

// Recordings store the snapshot types in the shapes internal/record
// declares (docs/FORMAT.md §8.1), which convert to these.

// ThreadStats is everything the kernel keeps exactly for one thread: a
// histogram per timed cause, NUMA task-move counts and task migrations.
type ThreadStats struct {
	PID   uint32
	TID   uint32
	Comm  string
	Hists Hists

	Migrations          uint64 // task_migration: CPU changes
	CrossNodeMigrations uint64 // of which the new CPU is on another node
}

// Hists are a thread's histograms, by cause.
type Hists map[Cause]*Hist

// FreezeNs is the time the thread was frozen by memory management: the
// freeze time of every cause that freezes. The report's and the view's
// thread totals both are this.
func (hs Hists) FreezeNs() uint64 {
	var ns uint64
	for c, h := range hs {
		if c.Freezes() {
			ns += h.FreezeNs()
		}
	}
	return ns
}

// SystemStats are system-wide counts that are never charged to a thread.
type SystemStats struct {
	KswapdWakeups         uint64
	KhugepagedCollapses   uint64
	KhugepagedCollapsedOK uint64
	KcompactdPasses       uint64
	KcompactdNs           uint64
	ProactivePasses       uint64 // compaction outside any allocation: sysctl or proactive
	ProactiveNs           uint64
	DirectCompactAttempts uint64 // try_to_compact_pages, every task
	TargetsFull           uint64 // processes --cgroup or --children could not follow: the target set was full
	// Stalls at least --stacks-min long whose stacks were asked for, and
	// those whose kernel or user stack was lost: a full stacks map, a user
	// stack the kernel could not walk.
	StacksTaken      uint64
	KernelStacksLost uint64
	UserStacksLost   uint64
}

// Snapshot is a point-in-time copy of the kernel-side aggregates.
type Snapshot struct {
	Threads    map[uint32]*ThreadStats // by TID
	System     SystemStats
	LostEvents uint64
	LostPerCPU []uint64
	// HistEntries of HistCapacity thread×cause histograms are in use; when
	// full, the kernel evicts the least recently used.
	HistEntries  int
	HistCapacity int
	// HistEvicted thread×cause histograms were evicted from the full map.
	HistEvicted uint64
	// CauseTotals hold every stall by cause, evicted threads' too.
	// Recordings made before they were kept have none.
	CauseTotals map[Cause]*Hist
	// Descendants are what a --pid target's descendants stalled while
	// they were watched but not traced (no --children); nil when they
	// were not watched.
	Descendants *Descendants
}

// Descendants are the stalls of a process target's descendants, which
// the kernel adds up without tracing them: the report then says when the
// work is in the children (a server that forks a process per connection).
type Descendants struct {
	// Stalled is how many descendant processes stalled at least once.
	Stalled uint64
	// Causes are their stalls by cause: timed memory causes only.
	Causes map[Cause]StallTime
	// NotWatched descendants were forked when the kernel's set of them
	// was full: their stalls are not in Causes.
	NotWatched uint64
}

// StallTime is a number of stalls and their time, without a histogram.
type StallTime struct {
	Count   uint64
	TotalNs uint64
	// NestedNs is the part of TotalNs inside another stall of the same
	// thread.
	NestedNs uint64
}

// FreezeNs is the time the descendants' threads were frozen: every
// memory cause's stalls, those nested in another counted once.
func (d *Descendants) FreezeNs() uint64 {
	var ns uint64
	for c, t := range d.Causes {
		if c.Freezes() {
			ns += t.TotalNs - min(t.NestedNs, t.TotalNs)
		}
	}
	return ns
}

// Thread returns the stats for tid, creating them.
func (s *Snapshot) Thread(pid, tid uint32, comm string) *ThreadStats {
	if s.Threads == nil {
		s.Threads = map[uint32]*ThreadStats{}
	}
	t := s.Threads[tid]
	if t == nil {
		t = &ThreadStats{PID: pid, TID: tid, Comm: comm, Hists: map[Cause]*Hist{}}
		s.Threads[tid] = t
	}
	if t.Comm == "" {
		t.Comm = comm
	}
	return t
}
