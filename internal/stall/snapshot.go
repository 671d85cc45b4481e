package stall

// The snapshot types are stored in recordings as JSON with these exact
// keys (docs/FORMAT.md §8.1): rename a field, never its tag.

// ThreadStats is everything the kernel keeps exactly for one thread: a
// histogram per timed cause, NUMA task-move counts and task migrations.
type ThreadStats struct {
	PID   uint32          `json:"PID"`
	TID   uint32          `json:"TID"`
	Comm  string          `json:"Comm"`
	Hists map[Cause]*Hist `json:"Hists"`

	Migrations          uint64 `json:"Migrations"`          // task_migration: CPU changes
	CrossNodeMigrations uint64 `json:"CrossNodeMigrations"` // of which the new CPU is on another node
}

// SystemStats are system-wide counts that are never charged to a thread.
type SystemStats struct {
	KswapdWakeups         uint64 `json:"KswapdWakeups"`
	KhugepagedCollapses   uint64 `json:"KhugepagedCollapses"`
	KhugepagedCollapsedOK uint64 `json:"KhugepagedCollapsedOK"`
	KcompactdPasses       uint64 `json:"KcompactdPasses"`
	KcompactdNs           uint64 `json:"KcompactdNs"`
	ProactivePasses       uint64 `json:"ProactivePasses"` // compaction outside any allocation: sysctl or proactive
	ProactiveNs           uint64 `json:"ProactiveNs"`
	DirectCompactAttempts uint64 `json:"DirectCompactAttempts"` // try_to_compact_pages, every task
	TargetsFull           uint64 `json:"TargetsFull"`           // processes --cgroup or --children could not follow: the target set was full
}

// Snapshot is a point-in-time copy of the kernel-side aggregates.
type Snapshot struct {
	Threads    map[uint32]*ThreadStats `json:"Threads"` // by TID
	System     SystemStats             `json:"System"`
	LostEvents uint64                  `json:"LostEvents"`
	LostPerCPU []uint64                `json:"LostPerCPU"`
	// HistEntries of HistCapacity thread×cause histograms are in use; when
	// full, the kernel evicts the least recently used.
	HistEntries  int `json:"HistEntries"`
	HistCapacity int `json:"HistCapacity"`
	// HistEvicted thread×cause histograms were evicted from the full map.
	HistEvicted uint64 `json:"HistEvicted,omitempty"`
	// CauseTotals hold every stall by cause, evicted threads' too.
	// Recordings made before they were kept have none.
	CauseTotals map[Cause]*Hist `json:"CauseTotals,omitempty"`
	// Descendants are what a --pid target's descendants stalled while
	// they were watched but not traced (no --children); nil when they
	// were not watched.
	Descendants *Descendants `json:"Descendants,omitempty"`
}

// Descendants are the stalls of a process target's descendants, which
// the kernel adds up without tracing them: the report then says when the
// work is in the children (a server that forks a process per connection).
type Descendants struct {
	// Stalled is how many descendant processes stalled at least once.
	Stalled uint64 `json:"Stalled"`
	// Causes are their stalls by cause: timed memory causes only.
	Causes map[Cause]StallTime `json:"Causes,omitempty"`
	// NotWatched descendants were forked when the kernel's set of them
	// was full: their stalls are not in Causes.
	NotWatched uint64 `json:"NotWatched,omitempty"`
}

// StallTime is a number of stalls and their time, without a histogram.
type StallTime struct {
	Count   uint64 `json:"Count"`
	TotalNs uint64 `json:"TotalNs"`
	// NestedNs is the part of TotalNs inside another stall of the same
	// thread.
	NestedNs uint64 `json:"NestedNs,omitempty"`
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
