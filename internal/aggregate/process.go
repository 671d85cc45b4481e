package aggregate

// ProcessName picks a process's display name from its threads' names:
// the main thread's (tid == pid), else the lowest tid's. The name depends
// on which threads were offered, never on their order (a map's), so a
// process keeps its name from one refresh to the next, and the report,
// the analysis, the view and Perfetto agree on it.
type ProcessName struct {
	name string
	tid  uint32
}

// Offer considers a thread of process pid named comm, and says whether
// the process's name changed. An empty name is never taken; the thread
// the process is named after renames it when offered again (after an
// exec).
func (p *ProcessName) Offer(pid, tid uint32, comm string) bool {
	if comm == "" || p.name != "" && !p.prefers(pid, tid) {
		return false
	}
	changed := comm != p.name
	p.name, p.tid = comm, tid
	return changed
}

// prefers says whether tid names process pid rather than the thread that
// names it now.
func (p *ProcessName) prefers(pid, tid uint32) bool {
	switch {
	case tid == p.tid:
		return true
	case p.tid == pid:
		return false
	case tid == pid:
		return true
	}
	return tid < p.tid
}

// String is the name: "" until a thread with a name was offered.
func (p *ProcessName) String() string { return p.name }
