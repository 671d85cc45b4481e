package stall

// ThreadStats is everything the kernel keeps exactly for one thread: a
// histogram per timed cause, NUMA task-move counts and task migrations.
type ThreadStats struct {
	PID   uint32
	TID   uint32
	Comm  string
	Hists map[Cause]*Hist

	Migrations          uint64 // task_migration: CPU changes
	CrossNodeMigrations uint64 // of which the new CPU is on another node
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
	TargetsFull           uint64 // processes --cgroup could not follow: the target set was full
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
