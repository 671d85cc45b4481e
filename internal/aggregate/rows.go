package aggregate

import "github.com/numatrace/numatrace/internal/stall"

// Row is one line of a thread or process table.
type Row struct {
	PID, TID  uint32 // TID 0 for a process row
	Comm      string
	Node      int // -1 unknown, -2 a process's threads on several nodes
	Threads   int
	StallNs   uint64
	ByCause   [stall.NumCauses]CauseTotal
	Migr      uint64
	CrossNode uint64
}

// Row is the thread's line, on the node of the CPU of its latest stall
// (cpuNode maps CPU to node). Once a snapshot has the kernel's
// histograms of the thread, its figures are theirs, as the report's are:
// the streamed stalls miss those under the stream threshold (most of
// mmap_lock's).
func (t *ThreadTotals) Row(cpuNode map[int]int) Row {
	r := Row{PID: t.PID, TID: t.TID, Comm: t.Comm, Node: -1, Threads: 1, StallNs: t.StallNs,
		ByCause: t.ByCause, Migr: t.Migr, CrossNode: t.CrossNode}
	if len(t.exact) > 0 {
		r.StallNs = t.exact.FreezeNs()
		for c, h := range t.exact {
			r.ByCause[c].takeHist(h)
		}
	}
	if n, ok := cpuNode[int(t.CPU)]; ok && t.CPU >= 0 {
		r.Node = n
	}
	// Streamed migrations may miss some; the kernel's count has them all.
	for _, c := range stall.AllCauses() {
		if c.CountsMigrations() {
			r.ByCause[c].Count = max(r.ByCause[c].Count, t.Migr)
		}
	}
	return r
}

// Row is the thread's line in its window's table, on node.
func (t *ThreadWindow) Row(node int) Row {
	return Row{PID: t.PID, TID: t.TID, Comm: t.Comm, Node: node, Threads: 1, StallNs: t.TotalNs, ByCause: t.ByCause}
}

// Processes merges thread rows by process, named as ProcessName names it.
func Processes(rows []Row) []Row {
	by := map[uint32]*Row{}
	names := map[uint32]*ProcessName{}
	for _, r := range rows {
		p := by[r.PID]
		if p == nil {
			p = &Row{PID: r.PID, Node: r.Node}
			by[r.PID] = p
			names[r.PID] = &ProcessName{}
		}
		names[r.PID].Offer(r.PID, r.TID, r.Comm)
		p.Comm = names[r.PID].String()
		if p.Node != r.Node {
			p.Node = -2 // spread over nodes
		}
		p.Threads++
		p.StallNs += r.StallNs
		p.Migr += r.Migr
		p.CrossNode += r.CrossNode
		for c := range r.ByCause {
			p.ByCause[c].Merge(r.ByCause[c])
		}
	}
	out := make([]Row, 0, len(by))
	for _, p := range by {
		out = append(out, *p)
	}
	return out
}
