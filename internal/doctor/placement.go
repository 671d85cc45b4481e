package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/numatrace/numatrace/internal/numamaps"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/topology"
)

// Thresholds from the seeds.
const (
	// Seed 002: "用 numastat -p 的 remote 占比作为核心指标，目标 <10%"; its
	// incidents were 46% (unbound) and 41% (CPU-only binding); seed 003's
	// job ran 68% local.
	remoteGoal = 0.10
	// Seed 001: a node must hold the process "加连接开销——经验上留 20% 余量".
	nodeHeadroom = 0.8
	// Below this a process's placement does not matter enough to report.
	minProcessPages = 64 << 20 / (numamaps.BasePageKB << 10) // 64 MiB
	// Seed 001: numa_hit 61%, numa_miss ~38k/s; seed 004: thousands per
	// second. Below 1000 pages/s (4 MiB/s) cross-node allocation is noise.
	crossNodeShare   = 0.10
	crossNodeRate    = 1000
	crossNodeCrit    = 0.30
	crossNodeCritRte = 10000
)

// crossShare is one of cross_node_alloc's two shares over all nodes:
// numa_miss of numa_hit+numa_miss, or other_node (less interleave_hit)
// of local_node+other_node. It is measured when every counter it needs
// grew (none went backwards) over the interval, and is else since boot.
type crossShare struct {
	name        string
	part, rest  uint64
	measured    bool
	notMeasured string // why not, "" when measured or when there is one reading
}

func (c crossShare) share() float64 {
	if c.part == 0 {
		return 0
	}
	return float64(c.part) / (float64(c.part) + float64(c.rest))
}

// crossShares reads both shares: growth where measured, else since boot.
func crossShares(m *machine) (miss, other crossShare) {
	read := func(name string, keys []string, sum func(get func(string) uint64) (uint64, uint64)) crossShare {
		c := crossShare{name: name, measured: m.span.measured()}
		for _, n := range m.nodes {
			for _, k := range keys {
				if _, why := m.span.nodeGrowth(n, k); why != "" && c.measured {
					c.measured, c.notMeasured = false, fmt.Sprintf("node %d %s %s", n, k, strings.TrimPrefix(why, "not measured: "))
				}
			}
		}
		for _, n := range m.nodes {
			part, rest := sum(func(k string) uint64 {
				if c.measured {
					g, _ := m.span.nodeGrowth(n, k)
					return g
				}
				return m.span.first.nodeStat[n][k]
			})
			c.part, c.rest = satAdd(c.part, part), satAdd(c.rest, rest)
		}
		return c
	}
	miss = read("numa_miss", []string{"numa_hit", "numa_miss"}, func(get func(string) uint64) (uint64, uint64) {
		return get("numa_miss"), get("numa_hit")
	})
	// An interleaved page lands on a node other than the CPU's half of
	// the time, as interleave intends (seed 004's fix): it is counted in
	// other_node and interleave_hit, and is not a mistake.
	other = read("other_node", []string{"local_node", "other_node", "interleave_hit"}, func(get func(string) uint64) (uint64, uint64) {
		ot := get("other_node")
		return ot - min(ot, get("interleave_hit")), get("local_node")
	})
	return miss, other
}

// 3. Allocations across nodes, machine-wide, from the nodes' numastat.
// numa_miss counts pages that came from this node although another was
// preferred (that node was short); other_node counts pages a CPU of
// another node allocated here (the allocating thread is remote to them).
// A share whose counters went backwards is not judged.
func checkCrossNodeAlloc(m *machine, _ *process) ([]Finding, string) {
	if len(m.nodes) < 2 {
		return nil, ""
	}
	if len(m.span.first.nodeStat) == 0 {
		return nil, "no numastat under /sys/devices/system/node"
	}
	miss, other := crossShares(m)
	e := nodeNumastatEvidence(m)
	unmeasured := unmeasuredShares(miss, other)
	e = append(e, unmeasured...)
	worst, measured := worstShare(miss, other)
	if worst.share() <= crossNodeShare {
		return nil, strings.Join(unmeasured, "; ")
	}
	f := crossNodeFinding()
	shares := func(c crossShare) string {
		if !c.measured && m.span.measured() {
			return "not measured"
		}
		return fmt.Sprintf("%.1f%%", 100*c.share())
	}
	e = append(e, fmt.Sprintf("numa_miss share %s, other_node share %s", shares(miss), shares(other)))
	f.Evidence = e
	if !measured {
		f.Severity = Info
		f.Title = fmt.Sprintf("since boot, %.0f%% of page allocations crossed nodes (the current rate is not measured)", 100*worst.share())
		return []Finding{f}, ""
	}
	rate := m.span.perSecond(worst.part)
	if rate < crossNodeRate {
		return nil, strings.Join(unmeasured, "; ")
	}
	f.Severity = Warn
	if worst.share() >= crossNodeCrit && rate >= crossNodeCritRte {
		f.Severity = Crit
	}
	f.Title = fmt.Sprintf("%.0f%% of page allocations crossed nodes over %s (%.0f pages/s)", 100*worst.share(), m.span.d, rate)
	return []Finding{f}, ""
}

// nodeNumastatEvidence is each node's numastat: per second when measured
// over a span, since boot otherwise.
func nodeNumastatEvidence(m *machine) []string {
	var e []string
	for _, n := range m.nodes {
		var vals []string
		for _, k := range []string{"numa_hit", "numa_miss", "numa_foreign", "local_node", "other_node", "interleave_hit"} {
			switch g, why := m.span.nodeGrowth(n, k); {
			case !m.span.measured():
				vals = append(vals, fmt.Sprintf("%s %d", k, m.span.first.nodeStat[n][k]))
			case why != "":
				vals = append(vals, k+" not measured")
			default:
				vals = append(vals, fmt.Sprintf("%s %.0f", k, m.span.perSecond(g)))
			}
		}
		when := "since boot"
		if m.span.measured() {
			when = "per second"
		}
		e = append(e, fmt.Sprintf("node %d numastat %s: %s", n, when, strings.Join(vals, ", ")))
	}
	return e
}

// unmeasuredShares says which shares are not measured, and why.
func unmeasuredShares(shares ...crossShare) []string {
	var unmeasured []string
	for _, c := range shares {
		if c.notMeasured != "" {
			unmeasured = append(unmeasured, fmt.Sprintf("the %s share is not measured: %s", c.name, c.notMeasured))
		}
	}
	return unmeasured
}

// worstShare is the worst share that was measured; with one reading, or
// with neither measured, the worst since boot, as information (measured
// false).
func worstShare(miss, other crossShare) (worst crossShare, measured bool) {
	var judged []crossShare
	for _, c := range []crossShare{miss, other} {
		if c.measured {
			judged = append(judged, c)
		}
	}
	measured = len(judged) > 0
	if !measured {
		judged = []crossShare{miss, other}
	}
	worst = judged[0]
	for _, c := range judged[1:] {
		if c.share() > worst.share() {
			worst = c
		}
	}
	return worst, measured
}

// crossNodeFinding is cross_node_alloc's wording, without its severity,
// title and evidence.
func crossNodeFinding() Finding {
	return Finding{
		Why: "A page allocated on another node than the CPU that uses it costs every later access 1.4–2× the latency and shares the " +
			"interconnect's bandwidth (in one incident numa_hit 61% held an OLTP P99 at 42 ms; 99.4% brought it to 11 ms). numa_miss means " +
			"the preferred node was short of memory; other_node means the allocating thread ran on another node than its memory.",
		TradeOff: "Binding a service's CPUs and memory to one node removes it when the service fits the node; a service bigger than a node " +
			"is better interleaved or split into one instance per node.",
		Fix:     "find the services that allocate across nodes: numatrace doctor --pid PID (their memory per node and where their threads run)",
		Persist: "bind each service that fits a node: numactl --cpunodebind=N --membind=N (systemd: CPUAffinity= and NUMAPolicy=bind NUMAMask=N)",
	}
}

// 4. A process's memory on other nodes than the threads that use it.
func checkRemoteMemory(m *machine, p *process) ([]Finding, string) {
	if p == nil || len(m.nodes) < 2 {
		return nil, ""
	}
	if p.maps.Mappings == 0 {
		return nil, "no numa_maps for the process"
	}
	if mismatched(m, p) || p.maps.Interleave != "" {
		return nil, "" // binding and interleave say it better
	}
	threads, basis := threadNodes(m, p, m.span)
	if !basis.measured {
		return remoteNotMeasured(m, p, basis.text)
	}
	remote, total := remoteEstimate(p, threads)
	if total < minProcessPages || remote <= remoteGoal {
		return nil, ""
	}
	pages := p.pagesOn()
	e := []string{
		ev(fmt.Sprintf("/proc/%d/status Cpus_allowed_list", p.pid), topology.FormatList(p.cpus)),
		ev(fmt.Sprintf("/proc/%d/status Mems_allowed_list", p.pid), topology.FormatList(p.mems)),
		ev("pages per node", pagesList(pages)),
		ev("CPU time per node ("+basis.text+")", sharesList(threads)),
		ev("remote share of accesses (estimate)", fmt.Sprintf("%.0f%%", 100*remote)),
	}
	if m.numaBalancing != nil {
		e = append(e, ev("/proc/sys/kernel/numa_balancing", *m.numaBalancing))
	}
	target, fits := homeNode(m, p, threads)
	e = append(e, fmt.Sprintf("process memory %d MiB; node %d MemTotal %d MiB", total*numamaps.BasePageKB>>10, target, m.memKB(target, "MemTotal")>>10))
	f := Finding{Severity: Warn, Evidence: e,
		Why: "Each access to a page on another node than the thread's crosses the interconnect at 1.4–2× the latency, and the CPU looks idle " +
			"while it waits (in reported incidents, 46% remote held a Java service's P99 at 7.2 ms and 3% brought it to 1.2 ms; a job at 68% local took 12.45 s, at 95% 8.92 s). " +
			"The estimate assumes every thread uses all of the memory alike, as a shared heap or buffer pool is used.",
	}
	switch {
	case p.cpuBound(m) && !p.memBound(m):
		wordCPUsBoundNotMemory(&f, m, p, remote)
	case p.cpuBound(m):
		wordPlacedBeforeBinding(&f, m, p, remote)
	default:
		wordRemoteUnbound(&f, m, p, remote, threads, pages)
		wordUnboundRemedy(&f, m, p, target, fits)
	}
	return []Finding{f}, ""
}

// wordCPUsBoundNotMemory words remote_memory for a process bound to a
// node's CPUs but free to allocate anywhere.
func wordCPUsBoundNotMemory(f *Finding, m *machine, p *process, remote float64) {
	f.Title = fmt.Sprintf("pid %d is bound to node %s's CPUs but not its memory: about %.0f%% of its accesses are remote", p.pid, nodeList(p.cpuNodes), 100*remote)
	f.Why += " Binding CPUs alone leaves the pages where they were first touched (--cpunodebind without --membind left a JVM 41% remote)."
	f.TradeOff = "Moving the pages costs a one-off stall while they migrate; leaving them costs every access. NUMA balancing would move them " +
		"slowly and keep sampling; numa_balancing=0 on its own is no cure."
	f.Fix = fmt.Sprintf("migratepages %d %s %s", p.pid, nodeList(others(m, p.cpuNodes)), nodeList(p.cpuNodes))
	f.Persist = fmt.Sprintf("bind memory with the CPUs: numactl --cpunodebind=%s --membind=%s (systemd: NUMAPolicy=bind NUMAMask=%s)",
		nodeList(p.cpuNodes), nodeList(p.cpuNodes), nodeList(p.cpuNodes))
}

// wordPlacedBeforeBinding words remote_memory for a process bound to a
// node whose pages were placed before the binding.
func wordPlacedBeforeBinding(f *Finding, m *machine, p *process, remote float64) {
	f.Title = fmt.Sprintf("about %.0f%% of pid %d's accesses are remote: its pages were placed before its binding to node %s", 100*remote, p.pid, nodeList(p.cpuNodes))
	f.TradeOff = "Migrating them costs a one-off stall; leaving them costs every access."
	f.Fix = fmt.Sprintf("migratepages %d %s %s", p.pid, nodeList(others(m, p.cpuNodes)), nodeList(p.cpuNodes))
	f.Persist = "start the process under its binding (numactl --cpunodebind=N --membind=N) so first touch lands on the node"
}

// wordRemoteUnbound words the title and why of remote_memory for a
// process bound to nothing.
func wordRemoteUnbound(f *Finding, m *machine, p *process, remote float64, threads map[int]float64, pages map[int]int64) {
	f.Title = fmt.Sprintf("pid %d is not bound and about %.0f%% of its accesses are remote: its threads run on node(s) %s, its memory is %s",
		p.pid, 100*remote, nodesWithShare(threads), sharesList(pageShares(pages)))
	if m.numaBalancing != nil && *m.numaBalancing != 0 {
		f.Why += " NUMA balancing is on and has not brought the memory to the threads; with many threads it migrates pages back and forth instead."
	} else {
		f.Why += " NUMA balancing is off, so nothing moves the memory to the threads."
	}
}

// wordUnboundRemedy words the remedy for an unbound process: binding it
// to target when it fits there, interleaving it when it does not.
func wordUnboundRemedy(f *Finding, m *machine, p *process, target int, fits bool) {
	if !fits {
		f.TradeOff = "The process does not fit one node with 20% headroom, so binding it would starve or OOM it. Interleaving its " +
			"memory makes about half of the accesses remote but evenly, and keeps one node from being exhausted; one instance per node keeps them local."
		f.Fix = "restart under numactl --interleave=all, or run one instance per node, each with --cpunodebind=N --membind=N"
		f.Persist = "change the unit's ExecStart (or NUMAPolicy=interleave in systemd)"
		return
	}
	f.TradeOff = fmt.Sprintf("Binding to node %d caps the process at that node's %d CPUs and its memory, and it can no longer spill to the "+
		"other node at peaks (one incident gained 44%% QPS from that). A process that outgrows a node is better interleaved.", target, len(m.nodeCPUs[target]))
	f.TradeOff = strings.Replace(f.TradeOff, " 1 CPUs ", " 1 CPU ", 1)
	f.Fix = fmt.Sprintf("taskset -a -p -c %s %d && migratepages %d %s %d", cpuList(m, map[int]bool{target: true}), p.pid, p.pid,
		nodeList(others(m, map[int]bool{target: true})), target)
	f.Persist = fmt.Sprintf("restart under numactl --cpunodebind=%d --membind=%d (systemd: CPUAffinity=%s, NUMAPolicy=bind, NUMAMask=%d); then, with "+
		"every latency-critical service bound, kernel.numa_balancing=0 as insurance", target, target, cpuList(m, map[int]bool{target: true}), target)
}

// remoteNotMeasured is remote_memory when where the threads run is not
// known: the memory per node is a fact, the remote share would be an
// assumption, so this is information and names what would measure it.
func remoteNotMeasured(m *machine, p *process, basis string) ([]Finding, string) {
	total := p.totalPages()
	if total < minProcessPages || len(m.nodes) < 2 {
		return nil, ""
	}
	pages := p.pagesOn()
	return []Finding{{Severity: Info,
		Title: fmt.Sprintf("pid %d's memory is %s and its CPUs span node(s) %s; its remote share is not measured: %s", p.pid,
			sharesList(pageShares(pages)), nodeList(p.cpuNodes), strings.TrimPrefix(basis, "not measured: ")),
		Evidence: []string{
			ev(fmt.Sprintf("/proc/%d/status Cpus_allowed_list", p.pid), topology.FormatList(p.cpus)),
			ev(fmt.Sprintf("/proc/%d/status Mems_allowed_list", p.pid), topology.FormatList(p.mems)),
			ev("pages per node", pagesList(pages)),
			ev("CPU time per node", basis),
			ev("remote share of accesses (estimate)", "not measured"),
		},
		Why: "The remote share weighs the pages on each node by the CPU time the threads spent there; without the threads' CPU time it would " +
			"only restate an assumption (threads spread evenly over the allowed CPUs), so doctor does not warn on it.",
		TradeOff: "None to weigh until it is measured.",
		Fix:      fmt.Sprintf("measure it: run numatrace doctor --pid %d on the machine as root, or copy /proc/%d/task with the copy", p.pid, p.pid),
	}}, ""
}

// homeNode is the node a process should be bound to (where most of its
// memory already is) and whether it fits there with headroom.
func homeNode(m *machine, p *process, threads map[int]float64) (int, bool) {
	pages := p.pagesOn()
	best := m.nodes[0]
	for _, n := range m.nodes {
		if pages[n] > pages[best] || (pages[n] == pages[best] && threads[n] > threads[best]) {
			best = n
		}
	}
	if p.cpuBound(m) && len(p.cpuNodes) == 1 {
		for n := range p.cpuNodes {
			best = n
		}
	}
	var total int64
	for _, v := range pages {
		total += v
	}
	memKB := m.memKB(best, "MemTotal")
	return best, memKB > 0 && float64(total*numamaps.BasePageKB) <= nodeHeadroom*float64(memKB)
}

func pageShares(pages map[int]int64) map[int]float64 {
	var total int64
	for _, n := range pages {
		total += n
	}
	out := map[int]float64{}
	for n, v := range pages {
		if total > 0 {
			out[n] = float64(v) / float64(total)
		}
	}
	return out
}

func others(m *machine, nodes map[int]bool) map[int]bool {
	out := map[int]bool{}
	for _, n := range m.nodes {
		if !nodes[n] {
			out[n] = true
		}
	}
	return out
}

func nodesWithShare(shares map[int]float64) string {
	set := map[int]bool{}
	for n, s := range shares {
		if s > 0 {
			set[n] = true
		}
	}
	return nodeList(set)
}

// allowedMems is where the process may allocate: its cpuset's mems,
// narrowed by a bind policy.
func allowedMems(p *process) (map[int]bool, string) {
	mems := map[int]bool{}
	for _, n := range p.mems {
		mems[n] = true
	}
	why := ev(fmt.Sprintf("/proc/%d/status Mems_allowed_list", p.pid), topology.FormatList(p.mems))
	if bind := p.maps.Bind; len(bind) > 0 {
		for n := range mems {
			if !bind[n] {
				delete(mems, n)
			}
		}
		why = ev(fmt.Sprintf("/proc/%d/numa_maps policy", p.pid), "bind:"+nodeList(bind))
	}
	return mems, why
}

// mismatched: the CPUs and the allowed memory share no node.
func mismatched(m *machine, p *process) bool {
	mems, _ := allowedMems(p)
	if len(mems) == 0 {
		return false
	}
	for n := range p.cpuNodes {
		if mems[n] {
			return false
		}
	}
	return true
}

// 5. CPUs on one node, memory bound to another. Seed 000 (补遗二):
// --cpunodebind=0 --membind=1 made a service 30% slower than no binding,
// with ~100% numa_miss.
func checkBinding(m *machine, p *process) ([]Finding, string) {
	if p == nil || len(m.nodes) < 2 || !mismatched(m, p) {
		return nil, ""
	}
	mems, memsWhy := allowedMems(p)
	return []Finding{{Severity: Crit,
		Title: fmt.Sprintf("pid %d runs on node(s) %s but may only allocate on node(s) %s: every access is remote", p.pid, nodeList(p.cpuNodes), nodeList(mems)),
		Evidence: []string{ev(fmt.Sprintf("/proc/%d/status Cpus_allowed_list", p.pid), topology.FormatList(p.cpus)), memsWhy,
			ev("pages per node", pagesList(p.pagesOn()))},
		Why:      "This is the \"numactl --cpunodebind=0 --membind=1\" mistake (or a cpuset with cpus and mems on different nodes): all of the process's memory is remote.",
		TradeOff: "None worth keeping: bind memory to the nodes the CPUs are on, or move the CPUs to the node with the free memory.",
		Fix: fmt.Sprintf("restart it under numactl --cpunodebind=%s --membind=%s, or set the cpuset's cpuset.mems to %s",
			nodeList(p.cpuNodes), nodeList(p.cpuNodes), nodeList(p.cpuNodes)),
		Persist: "change the unit's ExecStart (or NUMAPolicy=/NUMAMask= and CPUAffinity= in systemd), or the orchestrator's cpuset"}}, ""
}

// saturated reports how many CPUs the process used over the interval and
// whether that fills the one node it is bound to.
func saturated(m *machine, p *process) (float64, bool) {
	if !m.span.measured() || m.span.first.proc == nil || m.span.later.proc == nil || m.span.later.proc.ticks < m.span.first.proc.ticks {
		return 0, false
	}
	used := (m.span.later.proc.cpuSeconds() - m.span.first.proc.cpuSeconds()) / m.span.d.Seconds()
	return used, len(p.cpuNodes) == 1 && len(p.cpus) < m.ncpu && used >= 0.9*float64(len(p.cpus))
}

// 6. Bound to one node and using all of it. Seed 000 (第二个现场): node 0's
// 32 cores at 100%, node 1's idle, throughput half of what was expected.
func checkNodeSaturation(m *machine, p *process) ([]Finding, string) {
	if p == nil || len(m.nodes) < 2 {
		return nil, ""
	}
	if len(p.cpuNodes) == 1 && len(p.cpus) < m.ncpu && !m.span.measured() {
		return nil, "CPU use of a process bound to one node " + notMeasured
	}
	if first, later := m.span.first.proc, m.span.latest().proc; m.span.measured() && first != nil && later.ticks < first.ticks {
		return nil, fmt.Sprintf("CPU use not measured: the process's CPU time went from %d to %d ticks between the readings (another process with its pid?)", first.ticks, later.ticks)
	}
	used, full := saturated(m, p)
	if !full {
		return nil, ""
	}
	return []Finding{{Severity: Warn,
		Title: fmt.Sprintf("pid %d is bound to node %s's %d CPUs and uses all of them, while the machine has %d", p.pid, nodeList(p.cpuNodes), len(p.cpus), m.ncpu),
		Evidence: []string{ev("Cpus_allowed_list", topology.FormatList(p.cpus)), ev(fmt.Sprintf("CPU used over %s", m.span.d), fmt.Sprintf("%.2f CPUs", used)),
			ev("threads", p.threads)},
		Why: "Binding to one node is an optimisation only while the load fits the node; here the threads queue for node " + nodeList(p.cpuNodes) +
			"'s CPUs while the other node's sit idle (in one incident throughput doubled once it could use both).",
		TradeOff: "Spreading over both nodes makes some memory remote; interleaving the memory keeps that even, and one instance per node keeps it local. " +
			"Keep NUMA balancing on for a process that spans nodes: it is what moves pages to the threads there.",
		Fix:     fmt.Sprintf("widen the binding: taskset -a -p -c %s %d, and interleave new memory (restart under numactl --interleave=all)", topology.FormatList(allCPUs(m)), p.pid),
		Persist: "run one instance per node (numactl --cpunodebind=N --membind=N each), or numactl --interleave=all without a CPU binding"}}, ""
}

func allCPUs(m *machine) []int {
	var cpus []int
	for c := range m.cpuNode {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)
	return cpus
}

// 7. NUMA balancing on for a process placed by hand. Seed 002 turns it off
// once CPUs and memory are aligned ("对齐之后的保险，不是药"); seed 000's
// fix for a saturated node keeps it on. So this is information, with the
// trade-off, and never advice for a process that is not fully bound.
func checkNumaBalancing(m *machine, p *process) ([]Finding, string) {
	if p == nil {
		return nil, ""
	}
	if m.numaBalancing == nil {
		return nil, "/proc/sys/kernel/numa_balancing not found"
	}
	if len(m.nodes) < 2 || *m.numaBalancing == 0 || !p.cpuBound(m) || !p.memBound(m) || mismatched(m, p) {
		return nil, ""
	}
	if _, full := saturated(m, p); full {
		return nil, ""
	}
	mems, memsWhy := allowedMems(p)
	return []Finding{{Severity: Info,
		Title: fmt.Sprintf("automatic NUMA balancing still samples pid %d's memory, although its CPUs and memory are bound to node %s", p.pid, nodeList(mems)),
		Evidence: []string{ev("/proc/sys/kernel/numa_balancing", *m.numaBalancing), ev("Cpus_allowed_list", topology.FormatList(p.cpus)), memsWhy,
			m.span.growthEvidence("numa_hint_faults")},
		Why: "NUMA balancing unmaps pages periodically to sample where they are used; for a process already bound it can only cost " +
			"hint faults and TLB flushes. Switching it off once CPU and memory are aligned is insurance.",
		TradeOff: "The switch is machine-wide: unbound processes lose the automatic placement, and a bound service that outgrows its node and is " +
			"widened needs it again. Leave it on if anything else on the machine relies on it.",
		Fix: "sysctl -w kernel.numa_balancing=0", Persist: persistSysctl("kernel.numa_balancing", 0)}}, ""
}

// Seed 002: balancing with 32 busy threads "把页来回搬 (memory thrashing)",
// P99 spikes of 2–4 s. Migrating 10 MiB/s or more, or hint faults mostly
// remote at a high rate, is churn rather than a settling placement.
const (
	thrashMigratedPerSec = 2560 // pages: 10 MiB/s
	thrashFaultsPerSec   = 5000
	thrashLocalShare     = 0.5
)

// 8. NUMA balancing migrating pages back and forth.
func checkBalancingThrash(m *machine, _ *process) ([]Finding, string) {
	if len(m.nodes) < 2 || m.numaBalancing == nil || *m.numaBalancing == 0 {
		return nil, ""
	}
	if !m.span.measured() {
		return nil, "hint-fault and migration rates " + notMeasured
	}
	var g [3]uint64
	for i, k := range []string{"numa_hint_faults", "numa_hint_faults_local", "numa_pages_migrated"} {
		var why string
		if g[i], why = m.span.growth(k); why != "" {
			return nil, "hint-fault and migration rates: " + k + " " + why
		}
	}
	faults, local, migrated := g[0], g[1], g[2]
	fps, mps := m.span.perSecond(faults), m.span.perSecond(migrated)
	localShare := 1.0
	if faults > 0 {
		localShare = float64(local) / float64(faults)
	}
	if mps < thrashMigratedPerSec && (fps < thrashFaultsPerSec || localShare >= thrashLocalShare) {
		return nil, ""
	}
	return []Finding{{Severity: Warn,
		Title: fmt.Sprintf("NUMA balancing is migrating %.0f pages/s (%.1f MiB/s), with %.0f%% of its hint faults local", mps, mps*4/1024, 100*localShare),
		Evidence: []string{ev("/proc/sys/kernel/numa_balancing", *m.numaBalancing),
			fmt.Sprintf("over %s: numa_hint_faults %.0f/s, numa_hint_faults_local %.0f/s, numa_pages_migrated %.0f/s", m.span.d, fps, m.span.perSecond(local), mps)},
		Why: "Each sampled page costs a fault and each migration a copy and a TLB flush, in the faulting thread. When threads of one process run on both " +
			"nodes and share its memory, balancing moves pages back and forth instead of settling (in one incident, P99 spikes of 2–4 s every few minutes; " +
			"numatrace shows them as numa_migration and numa_task_move stalls).",
		TradeOff: "Turning balancing off stops the churn but not the remote accesses: unbound threads still drift. " +
			"Binding the busy services first and then turning it off removes both; it is machine-wide.",
		Fix:     "bind the busy services (numatrace doctor --pid PID names the node), then sysctl -w kernel.numa_balancing=0",
		Persist: persistSysctl("kernel.numa_balancing", 0) + ", with the services' bindings in their units"}}, ""
}

// 9. Interleave. Seeds 001 and 002 call it a mistake for a latency service
// (half of every access remote); seed 004 uses it as the fix when one node
// is exhausted by a process bigger than it, and seed 000 for a load bigger
// than a node. So the finding weighs the process against a node.
func checkInterleave(m *machine, p *process) ([]Finding, string) {
	if p == nil || len(m.nodes) < 2 {
		return nil, ""
	}
	if p.maps.Interleave == "" {
		return nil, ""
	}
	policy, pages := sanitize.Text(p.maps.Interleave), p.maps.InterleavePages
	threads, _ := threadNodes(m, p, m.span)
	home, fits := homeNode(m, p, threads)
	total := p.totalPages()
	e := []string{ev("numa_maps policy", policy), ev("interleaved pages", fmt.Sprintf("%d of %d", pages, total)),
		ev("pages per node", pagesList(p.pagesOn())),
		fmt.Sprintf("process memory %d MiB; node %d MemTotal %d MiB", total*numamaps.BasePageKB>>10, home, m.memKB(home, "MemTotal")>>10)}
	f := Finding{Evidence: e,
		Why: "Interleave spreads pages round-robin over nodes, so about half of every thread's accesses are remote, evenly: good for bandwidth " +
			"and for a process bigger than a node, costly for a latency-sensitive one (in one incident, latency got steadily worse with it).",
		Persist: "change the unit's ExecStart / NUMAPolicy="}
	if fits {
		f.Severity = Warn
		f.Title = fmt.Sprintf("pid %d interleaves memory (%s) although it fits in node %d: about half of its accesses are remote", p.pid, policy, home)
		f.TradeOff = "Binding it to one node makes its accesses local (two incidents measured interleave as worse for latency) but caps it at " +
			"that node's CPUs and memory. Interleave is a common choice for large-memory services in general, to avoid a hot node; if this is " +
			"a bandwidth-bound batch job, or its load outgrows one node, interleave is right and this can be ignored."
		f.Fix = fmt.Sprintf("restart with numactl --cpunodebind=%d --membind=%d instead of --interleave", home, home)
	} else {
		f.Severity = Info
		f.Title = fmt.Sprintf("pid %d interleaves memory (%s): it is bigger than one node with headroom, where interleave is the usual fix", p.pid, policy)
		f.TradeOff = "Interleave keeps one node from being exhausted (in one incident, QPS went from 12k to 18k and numa_miss from 4500/s to 120/s) at the cost of half " +
			"the accesses being remote; one instance per node, each bound, would keep them local if the service can be split."
		f.Fix = ""
	}
	return []Finding{f}, ""
}
