package aggregate

// ProcessName is the one rule for a process's display name, wherever
// threads are grouped by process (the report, the spike verdicts, the
// Perfetto export, the view): its main thread's name, else its lowest
// tid's, so the name never depends on the order threads are met in.
type ProcessName struct {
	PID  uint32
	tid  uint32
	name string
}

// Offer puts forward thread tid's name.
func (p *ProcessName) Offer(tid uint32, name string) {
	if tid == p.PID || p.name == "" || (p.tid != p.PID && tid < p.tid) {
		p.tid, p.name = tid, name
	}
}

// Name is the process's name: "" until a thread was offered.
func (p *ProcessName) Name() string { return p.name }
