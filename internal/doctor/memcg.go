package doctor

import (
	"fmt"

	"github.com/numatrace/numatrace/internal/memcg"
)

// memcgSpan is --pid's memory cgroup as first read and as last read
// (one reading unless measured), nil readings where it has none.
func (m *machine) memcgSpan() memcg.Span {
	var s memcg.Span
	if p := m.span.first.proc; p != nil {
		s.Start = p.memcg
	}
	if m.span.measured() && m.span.later.proc != nil {
		s.End = m.span.later.proc.memcg
		s.Over = m.span.d.String()
	}
	return s
}

// 18. The process's memory cgroup at its limit. The kernel charges a
// group's page cache and anonymous memory against its limit, and at the
// limit every allocation in it reclaims the group's own pages first:
// memcg_reclaim stalls, the cause of the redis incident the README shows.
func checkMemoryCgroup(m *machine, p *process) ([]Finding, string) {
	if p == nil {
		return nil, ""
	}
	s := m.memcgSpan()
	r := s.Last()
	if r == nil {
		return nil, m.span.first.proc.memcgWhy
	}
	if !s.AtLimit() {
		return nil, ""
	}
	var e []string
	for _, v := range r.Values() {
		e = append(e, ev(r.Path(v.File), v.Value))
	}
	for _, c := range s.Counters() {
		if c.Measured {
			e = append(e, ev(fmt.Sprintf("%s growth over %s", c.Name, s.Over), c.Grew))
		}
	}
	if r.Member != "" {
		e = append(e, fmt.Sprintf("pid %d is in %s, inside this group: its limit is the tightest over it", p.pid, r.Member))
	}
	sev := Warn
	for _, c := range s.Counters() {
		if c.Name == "oom_kill" && (c.Grew > 0 || !c.Measured) {
			sev = Crit // the kernel killed a process of the group for it
		}
	}
	knob := r.Path(r.Knob())
	raised := max(r.Bound()/2*3, r.Peak/2*3) >> 20 << 20 // half again as much, in whole MiB
	f := Finding{Severity: sev,
		Title:    s.Sentence(),
		Evidence: e,
		Why: "The kernel charges the page cache a group's processes read or write, and their anonymous memory, against the group's limit. " +
			"At the limit every allocation in the group first reclaims the group's own pages, in the allocating thread: memcg_reclaim stalls " +
			"in numatrace (on cgroup v2, over memory.high the kernel also throttles the group: memstall_wait of kind memory_high). " +
			"Past what reclaim frees, the OOM killer takes a process of the group. A service that reads files fills its limit with page cache, " +
			"and then waits on reclaim although most of what it holds could be dropped.",
		TradeOff: "A higher limit leaves less memory for the machine's other groups. Keeping the limit and cutting what fills it " +
			"(reading once with O_DIRECT or POSIX_FADV_DONTNEED, moving batch readers such as backups to a group of their own) keeps the neighbours' share.",
		Fix: fmt.Sprintf("echo %d > %s (half again as much: size it to the working set, page cache included)", raised, knob),
		Persist: "where the group is made: MemoryMax= (cgroup v2) or MemoryLimit= (v1) in the service's unit, the container's --memory, " +
			"or the pod's resources.limits.memory"}
	if r.HighBinds() {
		f.Persist = "MemoryHigh= in the service's unit (cgroup v2), or the container runtime's memory.high setting"
	}
	return []Finding{f}, ""
}

// memcgSpan is the report's reading of --pid's memory cgroup, as a span
// of one reading.
func (r *Report) memcgSpan() memcg.Span { return memcg.Span{End: r.MemoryCgroup.Reading()} }
