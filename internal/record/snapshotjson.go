package record

import "github.com/numatrace/numatrace/internal/stall"

// A snapshot record as the format has it (docs/FORMAT.md §8.1). The keys
// of its data are the Go field names the first files had, spelt out here
// so that the stall types can change and the format does not. Each shape
// has the fields of the stall type it carries, so the two convert into
// each other: a field added there fails to compile here until the format
// says how to write it (the shapes that hold maps of other shapes are
// copied field by field: TestSnapshotShapesHaveTheStallFields holds them
// to the stall types' fields).

type snapshotRecord struct {
	MonoNs uint64        `json:"mono_ns"`
	Final  bool          `json:"final,omitempty"`
	Data   *snapshotJSON `json:"data"`
}

type snapshotJSON struct {
	Threads      map[uint32]*threadJSON    `json:"Threads"` // by TID
	System       systemJSON                `json:"System"`
	LostEvents   uint64                    `json:"LostEvents"`
	LostPerCPU   []uint64                  `json:"LostPerCPU"`
	HistEntries  int                       `json:"HistEntries"`
	HistCapacity int                       `json:"HistCapacity"`
	HistEvicted  uint64                    `json:"HistEvicted,omitempty"`
	CauseTotals  map[stall.Cause]*histJSON `json:"CauseTotals,omitempty"`
	Descendants  *descendantsJSON          `json:"Descendants,omitempty"`
}

type threadJSON struct {
	PID                 uint32                    `json:"PID"`
	TID                 uint32                    `json:"TID"`
	Comm                string                    `json:"Comm"`
	Hists               map[stall.Cause]*histJSON `json:"Hists"`
	Migrations          uint64                    `json:"Migrations"`
	CrossNodeMigrations uint64                    `json:"CrossNodeMigrations"`
}

// systemJSON is stall.SystemStats.
type systemJSON struct {
	KswapdWakeups         uint64 `json:"KswapdWakeups"`
	KhugepagedCollapses   uint64 `json:"KhugepagedCollapses"`
	KhugepagedCollapsedOK uint64 `json:"KhugepagedCollapsedOK"`
	KcompactdPasses       uint64 `json:"KcompactdPasses"`
	KcompactdNs           uint64 `json:"KcompactdNs"`
	ProactivePasses       uint64 `json:"ProactivePasses"`
	ProactiveNs           uint64 `json:"ProactiveNs"`
	DirectCompactAttempts uint64 `json:"DirectCompactAttempts"`
	TargetsFull           uint64 `json:"TargetsFull"`
	StacksTaken           uint64 `json:"StacksTaken,omitempty"`
	KernelStacksLost      uint64 `json:"KernelStacksLost,omitempty"`
	UserStacksLost        uint64 `json:"UserStacksLost,omitempty"`
}

// histJSON is stall.Hist.
type histJSON struct {
	Count    uint64                  `json:"Count"`
	TotalNs  uint64                  `json:"TotalNs"`
	MaxNs    uint64                  `json:"MaxNs"`
	NestedNs uint64                  `json:"NestedNs"`
	Slots    [stall.HistSlots]uint64 `json:"Slots"`
}

type descendantsJSON struct {
	Stalled    uint64                        `json:"Stalled"`
	Causes     map[stall.Cause]stallTimeJSON `json:"Causes,omitempty"`
	NotWatched uint64                        `json:"NotWatched,omitempty"`
}

// stallTimeJSON is stall.StallTime.
type stallTimeJSON struct {
	Count    uint64 `json:"Count"`
	TotalNs  uint64 `json:"TotalNs"`
	NestedNs uint64 `json:"NestedNs,omitempty"`
}

func newSnapshotRecord(s Snapshot) snapshotRecord {
	return snapshotRecord{MonoNs: s.MonoNs, Final: s.Final, Data: newSnapshotJSON(s.Data)}
}

func (j *snapshotRecord) snapshot() *Snapshot {
	return &Snapshot{MonoNs: j.MonoNs, Final: j.Final, Data: j.Data.snapshot()}
}

// Every conversion keeps nil as nil: the format tells a null map from an
// empty one.

func newSnapshotJSON(s *stall.Snapshot) *snapshotJSON {
	if s == nil {
		return nil
	}
	return &snapshotJSON{Threads: convert(s.Threads, newThreadJSON), System: systemJSON(s.System),
		LostEvents: s.LostEvents, LostPerCPU: s.LostPerCPU, HistEntries: s.HistEntries, HistCapacity: s.HistCapacity,
		HistEvicted: s.HistEvicted, CauseTotals: convert(s.CauseTotals, newHistJSON),
		Descendants: newDescendantsJSON(s.Descendants)}
}

func (j *snapshotJSON) snapshot() *stall.Snapshot {
	if j == nil {
		return nil
	}
	return &stall.Snapshot{Threads: convert(j.Threads, (*threadJSON).thread), System: stall.SystemStats(j.System),
		LostEvents: j.LostEvents, LostPerCPU: j.LostPerCPU, HistEntries: j.HistEntries, HistCapacity: j.HistCapacity,
		HistEvicted: j.HistEvicted, CauseTotals: convert(j.CauseTotals, (*histJSON).hist),
		Descendants: j.Descendants.descendants()}
}

func newThreadJSON(t *stall.ThreadStats) *threadJSON {
	if t == nil {
		return nil
	}
	return &threadJSON{PID: t.PID, TID: t.TID, Comm: t.Comm, Hists: convert(t.Hists, newHistJSON),
		Migrations: t.Migrations, CrossNodeMigrations: t.CrossNodeMigrations}
}

func (j *threadJSON) thread() *stall.ThreadStats {
	if j == nil {
		return nil
	}
	return &stall.ThreadStats{PID: j.PID, TID: j.TID, Comm: j.Comm, Hists: convert(j.Hists, (*histJSON).hist),
		Migrations: j.Migrations, CrossNodeMigrations: j.CrossNodeMigrations}
}

func newHistJSON(h *stall.Hist) *histJSON { return (*histJSON)(h) }
func (j *histJSON) hist() *stall.Hist     { return (*stall.Hist)(j) }

func newDescendantsJSON(d *stall.Descendants) *descendantsJSON {
	if d == nil {
		return nil
	}
	return &descendantsJSON{Stalled: d.Stalled, NotWatched: d.NotWatched,
		Causes: convert(d.Causes, func(t stall.StallTime) stallTimeJSON { return stallTimeJSON(t) })}
}

func (j *descendantsJSON) descendants() *stall.Descendants {
	if j == nil {
		return nil
	}
	return &stall.Descendants{Stalled: j.Stalled, NotWatched: j.NotWatched,
		Causes: convert(j.Causes, func(t stallTimeJSON) stall.StallTime { return stall.StallTime(t) })}
}

// convert maps every value of m through f; nil stays nil.
func convert[K comparable, A, B any](m map[K]A, f func(A) B) map[K]B {
	if m == nil {
		return nil
	}
	out := make(map[K]B, len(m))
	for k, v := range m {
		out[k] = f(v)
	}
	return out
}
