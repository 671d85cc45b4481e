package doctor

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/procfs"

	"github.com/numatrace/numatrace/internal/numamaps"
	"github.com/numatrace/numatrace/internal/topology"
)

const sysctlFile = "/etc/sysctl.d/90-numa.conf"

func persistSysctl(key string, v any) string {
	return fmt.Sprintf("echo '%s = %v' >> %s && sysctl --system", key, v, sysctlFile)
}

// nodeList is "0,1": the set's nodes in order.
func nodeList(set map[int]bool) string {
	var ns []int
	for n := range set {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	return joinInts(ns, ",")
}

// 1. zone_reclaim_mode on a multi-node machine.
func checkZoneReclaim(m *machine, _ *process, interval time.Duration) ([]Finding, string) {
	if m.vm.ZoneReclaimMode == nil {
		return nil, "/proc/sys/vm/zone_reclaim_mode not found (a kernel without NUMA)"
	}
	mode := *m.vm.ZoneReclaimMode
	if mode == 0 || len(m.nodes) < 2 {
		return nil, ""
	}
	f := Finding{Severity: Warn, Title: fmt.Sprintf("vm.zone_reclaim_mode=%d: allocations reclaim their own node before using another's free memory", mode),
		Evidence: []string{ev("/proc/sys/vm/zone_reclaim_mode", mode), ev("NUMA nodes", len(m.nodes)),
			ev("/proc/vmstat zone_reclaim_failed", m.vmstat2["zone_reclaim_failed"])},
		Why: "With node reclaim on, a thread whose local node is short of free pages stalls reclaiming (and, with bit 2 or 4, writing back or unmapping) " +
			"page cache on that node while the other nodes have memory free. The stalls are node_reclaim in numatrace.",
		TradeOff: "Off, allocations spill to a remote node: slower memory access for that data, but no reclaim stall. Only workloads partitioned " +
			"per node that cannot tolerate remote memory benefit from it on.",
		Fix: "sysctl -w vm.zone_reclaim_mode=0", Persist: persistSysctl("vm.zone_reclaim_mode", 0)}
	if interval > 0 {
		f.Evidence = append(f.Evidence, ev(fmt.Sprintf("zone_reclaim_failed growth over %s", interval), m.grew("zone_reclaim_failed")))
	}
	// Any failure so far (growth included): node reclaim did not help.
	if m.vmstat2["zone_reclaim_failed"] > 0 {
		f.Severity = Crit
	}
	return []Finding{f}, ""
}

// 2. THP enabled=always with defrag=always.
func checkTHP(m *machine, _ *process, interval time.Duration) ([]Finding, string) {
	if m.thpEnabled == "" {
		return nil, "no transparent huge pages in this kernel"
	}
	if m.thpEnabled != "always" || m.thpDefrag != "always" {
		return nil, ""
	}
	f := Finding{Severity: Warn, Title: "THP enabled=always with defrag=always: every huge-page fault may compact memory synchronously",
		Evidence: []string{ev("/sys/kernel/mm/transparent_hugepage/enabled", m.thpEnabled),
			ev("/sys/kernel/mm/transparent_hugepage/defrag", m.thpDefrag),
			ev("/proc/vmstat compact_stall", m.vmstat2["compact_stall"])},
		Why: "defrag=always makes a thread that faults in a huge page reclaim and compact memory right there when no 2 MiB page is free: " +
			"milliseconds to seconds of direct compaction in the allocating thread (compaction stalls in numatrace).",
		TradeOff: "defrag=madvise (or defer+madvise) compacts synchronously only for regions that asked for huge pages and leaves the rest to " +
			"kcompactd: fewer huge pages for other processes. Databases (Redis, MongoDB, PostgreSQL, Oracle) usually want enabled=never.",
		Fix:     "echo madvise > /sys/kernel/mm/transparent_hugepage/defrag",
		Persist: "add transparent_hugepage=madvise to the kernel command line, or a tmpfiles.d line: echo 'w /sys/kernel/mm/transparent_hugepage/defrag - - - - madvise' > /etc/tmpfiles.d/thp.conf"}
	if interval > 0 {
		g := m.grew("compact_stall")
		f.Evidence = append(f.Evidence, ev(fmt.Sprintf("compact_stall growth over %s", interval), g))
		if g > 0 {
			f.Severity = Crit
		}
	}
	return []Finding{f}, ""
}

func explicitPolicy(p *process) (string, bool) {
	for _, mp := range p.maps {
		if strings.HasPrefix(mp.Policy, "bind") || strings.HasPrefix(mp.Policy, "prefer") || strings.HasPrefix(mp.Policy, "interleave") {
			return mp.Policy, true
		}
	}
	return "", false
}

// bound reports whether the process is pinned to part of the machine.
func bound(m *machine, p *process) bool {
	return len(p.cpuNodes) < len(m.nodes) || (len(p.mems) > 0 && len(p.mems) < len(m.nodes))
}

// 3. numa_balancing against the process's placement.
func checkNumaBalancing(m *machine, p *process, _ time.Duration) ([]Finding, string) {
	if p == nil {
		return nil, ""
	}
	if m.numaBalancing == nil {
		return nil, "/proc/sys/kernel/numa_balancing not found"
	}
	if len(m.nodes) < 2 {
		return nil, ""
	}
	on := *m.numaBalancing != 0
	pol, explicit := explicitPolicy(p)
	share, remote, total := p.remoteShare()
	switch {
	case on && (bound(m, p) || explicit):
		e := []string{ev("/proc/sys/kernel/numa_balancing", *m.numaBalancing), ev("Cpus_allowed_list nodes", nodeList(p.cpuNodes)),
			ev("Mems_allowed_list", p.mems)}
		if explicit {
			e = append(e, ev("numa_maps policy", pol))
		}
		return []Finding{{Severity: Warn, Title: fmt.Sprintf("automatic NUMA balancing is on for pid %d, which is also placed by hand: two managers", p.pid),
			Evidence: e,
			Why: "The kernel's NUMA balancing unmaps pages to sample accesses and migrates pages and tasks, while the process's binding " +
				"says where they must be. The sampling faults and migrations (numa_migration, numa_task_move) cost time and fight the binding.",
			TradeOff: "Turning balancing off is machine-wide: unbound processes lose automatic placement. The alternative is to drop the manual binding.",
			Fix:      "sysctl -w kernel.numa_balancing=0", Persist: persistSysctl("kernel.numa_balancing", 0)}}, ""
	case !on && total > 0 && share > 0.5:
		return []Finding{{Severity: Warn, Title: fmt.Sprintf("automatic NUMA balancing is off while %.0f%% of pid %d's memory is on nodes it does not run on", share*100, p.pid),
			Evidence: []string{ev("/proc/sys/kernel/numa_balancing", 0), ev("remote pages", fmt.Sprintf("%d of %d", remote, total)),
				ev("Cpus_allowed_list nodes", nodeList(p.cpuNodes))},
			Why:      "Nothing moves the memory to where the threads run, so most accesses cross the interconnect: slower and bandwidth-limited.",
			TradeOff: "Balancing costs sampling faults and migrations; binding CPUs and memory to the same node (numactl --cpunodebind=N --membind=N) avoids both.",
			Fix:      "sysctl -w kernel.numa_balancing=1", Persist: persistSysctl("kernel.numa_balancing", 1)}}, ""
	}
	return nil, ""
}

// 4. CPU binding against memory binding, and binding too tight.
func checkBinding(m *machine, p *process, interval time.Duration) ([]Finding, string) {
	if p == nil || len(m.nodes) < 2 {
		return nil, ""
	}
	var out []Finding
	// Where the process may allocate: its cpuset's mems, narrowed by a
	// bind policy (numactl --membind sets the task's policy, which
	// numa_maps shows on every mapping without its own).
	mems := map[int]bool{}
	for _, n := range p.mems {
		mems[n] = true
	}
	memsWhy := ev("/proc/"+fmt.Sprint(p.pid)+"/status Mems_allowed_list", p.mems)
	if bind := bindNodes(p.maps); len(bind) > 0 {
		for n := range mems {
			if !bind[n] {
				delete(mems, n)
			}
		}
		memsWhy = ev("/proc/"+fmt.Sprint(p.pid)+"/numa_maps policy", "bind:"+nodeList(bind))
	}
	overlap := false
	for n := range p.cpuNodes {
		overlap = overlap || mems[n]
	}
	if len(mems) > 0 && !overlap {
		out = append(out, Finding{Severity: Crit,
			Title: fmt.Sprintf("pid %d runs on node(s) %s but may only allocate on node(s) %s: every access is remote", p.pid, nodeList(p.cpuNodes), nodeList(mems)),
			Evidence: []string{ev("/proc/"+fmt.Sprint(p.pid)+"/status Cpus_allowed_list", p.cpus), memsWhy,
				ev("pages per node", pagesList(p.pagesOn()))},
			Why:      "This is the \"numactl --cpunodebind=0 --membind=1\" mistake (or a cpuset with cpus and mems on different nodes): all of the process's memory is remote.",
			TradeOff: "None worth keeping: bind memory to the nodes the CPUs are on.",
			Fix:      fmt.Sprintf("restart it under numactl --cpunodebind=%s --membind=%s, or set the cpuset's cpuset.mems to %s", nodeList(p.cpuNodes), nodeList(p.cpuNodes), nodeList(p.cpuNodes)),
			Persist:  "change the unit's ExecStart (or NUMAPolicy=/NUMAMask= and CPUAffinity= in systemd), or the orchestrator's cpuset"})
	} else if share, remote, total := p.remoteShare(); total > 0 && share > 0.5 && len(p.cpuNodes) < len(m.nodes) {
		out = append(out, Finding{Severity: Warn,
			Title: fmt.Sprintf("%.0f%% of pid %d's pages are on nodes its CPUs are not on", share*100, p.pid),
			Evidence: []string{ev("Cpus_allowed_list nodes", nodeList(p.cpuNodes)), ev("remote pages", fmt.Sprintf("%d of %d", remote, total)),
				ev("pages per node", pagesList(p.pagesOn()))},
			Why:      "The memory was placed before the CPU binding (or by another node's first touch): remote accesses cost latency and interconnect bandwidth.",
			TradeOff: "Migrating it (migratepages) costs a one-off stall; leaving it costs every access.",
			Fix:      fmt.Sprintf("migratepages %d all %s", p.pid, nodeList(p.cpuNodes)),
			Persist:  "bind memory with the CPUs from the start: numactl --cpunodebind=N --membind=N"})
	}
	if len(p.cpuNodes) == 1 && len(p.cpus) < m.ncpu && interval > 0 {
		used := (p.cpuSecond2 - p.cpuSeconds) / interval.Seconds()
		if used >= 0.9*float64(len(p.cpus)) {
			out = append(out, Finding{Severity: Warn,
				Title: fmt.Sprintf("pid %d is bound to node %s's %d CPUs and uses all of them, while the machine has %d", p.pid, nodeList(p.cpuNodes), len(p.cpus), m.ncpu),
				Evidence: []string{ev("Cpus_allowed_list", p.cpus), ev(fmt.Sprintf("CPU used over %s", interval), fmt.Sprintf("%.2f CPUs", used)),
					ev("threads", p.threads)},
				Why:      "The process is CPU-bound on one node while the other node's CPUs sit idle: its threads queue for CPU.",
				TradeOff: "Spreading it over both nodes makes some memory remote; interleave or per-node sharding can keep that small.",
				Fix:      "widen the binding: taskset -a -p -c 0-" + fmt.Sprint(m.ncpu-1) + " " + fmt.Sprint(p.pid),
				Persist:  "change the unit's CPUAffinity= / numactl options"})
		}
	}
	return out, ""
}

// 5. Interleave on a (possibly) latency-sensitive process.
func checkInterleave(m *machine, p *process, _ time.Duration) ([]Finding, string) {
	if p == nil || len(m.nodes) < 2 {
		return nil, ""
	}
	var pages int64
	var policy string
	for _, mp := range p.maps {
		if strings.HasPrefix(mp.Policy, "interleave") || strings.HasPrefix(mp.Policy, "weighted-interleave") {
			policy = mp.Policy
			for _, n := range mp.Pages {
				pages += n
			}
		}
	}
	if policy == "" {
		return nil, ""
	}
	_, _, total := p.remoteShare()
	return []Finding{{Severity: Warn,
		Title:    fmt.Sprintf("pid %d interleaves memory across nodes (%s): about half of its accesses are remote", p.pid, policy),
		Evidence: []string{ev("numa_maps policy", policy), ev("interleaved pages", fmt.Sprintf("%d of %d", pages, total))},
		Why:      "Interleaving spreads pages round-robin over nodes: good for bandwidth-bound batch work, but every thread pays remote latency on part of its data, which shows in tail latency.",
		TradeOff: "For a latency-sensitive service, binding each instance to one node (with its memory) is faster; interleave remains right for a single process bigger than one node's bandwidth.",
		Fix:      "restart without numactl --interleave (or with --cpunodebind=N --membind=N per instance)",
		Persist:  "change the unit's ExecStart / NUMAPolicy="}}, ""
}

// 6. One node below its low watermark while another has room.
func checkNodeImbalance(m *machine, _ *process, _ time.Duration) ([]Finding, string) {
	if len(m.nodes) < 2 {
		return nil, ""
	}
	if len(m.zones) == 0 {
		return nil, "/proc/zoneinfo not readable"
	}
	type node struct{ free, low, high int64 }
	by := map[string]*node{}
	for _, z := range m.zones {
		if z.NrFreePages == nil || z.Low == nil || z.High == nil {
			continue
		}
		n := by[z.Node]
		if n == nil {
			n = &node{}
			by[z.Node] = n
		}
		n.free += *z.NrFreePages
		n.low += *z.Low
		n.high += *z.High
	}
	var short, roomy []string
	var e []string
	var names []string
	for name := range by {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := by[name]
		e = append(e, fmt.Sprintf("node %s: free %d pages, low %d, high %d", name, n.free, n.low, n.high))
		if n.free < n.low {
			short = append(short, name)
		} else if n.free > 4*n.high {
			roomy = append(roomy, name)
		}
	}
	if len(short) == 0 || len(roomy) == 0 {
		return nil, ""
	}
	return []Finding{{Severity: Warn,
		Title:    fmt.Sprintf("node %s is below its low watermark while node %s has memory free", strings.Join(short, ","), strings.Join(roomy, ",")),
		Evidence: e,
		Why:      "Allocations that prefer or are bound to the short node wake kswapd and enter direct reclaim (or node reclaim) there, although the machine as a whole has memory.",
		TradeOff: "Spreading the load (or its memory) over nodes makes some accesses remote; a bound workload that outgrew its node needs a wider binding.",
		Fix:      "find who fills the node (numatrace doctor --pid P --numastat, numastat -m) and rebalance or widen its binding",
		Persist:  "size per-node workloads to their node's memory"}}, ""
}

// 7. Explicit huge pages reserved but unused.
func checkHugepages(m *machine, _ *process, _ time.Duration) ([]Finding, string) {
	mi := m.meminfo
	if mi.HugePagesTotal == nil || mi.HugePagesFree == nil || mi.Hugepagesize == nil || mi.MemTotal == nil || mi.MemAvailable == nil {
		return nil, "/proc/meminfo lacks HugePages_* or MemAvailable"
	}
	sizeKB := *mi.Hugepagesize
	freeKB := *mi.HugePagesFree * sizeKB
	totalKB := *mi.HugePagesTotal * sizeKB
	if totalKB == 0 || freeKB < *mi.MemTotal/20 { // under 5% of memory idle in the pool
		return nil, ""
	}
	e := []string{ev("HugePages_Total", *mi.HugePagesTotal), ev("HugePages_Free", *mi.HugePagesFree),
		ev("Hugepagesize", fmt.Sprintf("%d kB", sizeKB)), ev("MemTotal", fmt.Sprintf("%d kB", *mi.MemTotal)),
		ev("MemAvailable", fmt.Sprintf("%d kB", *mi.MemAvailable))}
	for _, n := range m.nodes {
		if nm := m.nodeMem[n]; nm != nil {
			e = append(e, fmt.Sprintf("node %d: HugePages_Total %d, HugePages_Free %d", n, nm["HugePages_Total"], nm["HugePages_Free"]))
		}
	}
	sev := Warn
	if freeKB > *mi.MemAvailable {
		sev = Crit
	}
	return []Finding{{Severity: sev,
		Title:    fmt.Sprintf("%d MiB of explicit huge pages sit unused while normal memory has %d MiB available", freeKB/1024, *mi.MemAvailable/1024),
		Evidence: e,
		Why:      "Pages in the hugetlb pool are taken out of normal memory whether or not anything maps them: the reservation eats the memory every other allocation needs, so reclaim starts earlier.",
		TradeOff: "Shrinking the pool returns memory now; growing it again later may fail on fragmented memory, so keep what the application really maps (HugePages_Total - HugePages_Free, plus headroom).",
		Fix:      fmt.Sprintf("sysctl -w vm.nr_hugepages=%d", *mi.HugePagesTotal-*mi.HugePagesFree),
		Persist:  persistSysctl("vm.nr_hugepages", *mi.HugePagesTotal-*mi.HugePagesFree) + " (or the hugepages= kernel parameter)"}}, ""
}

// 8. Watermarks on large-memory machines.
func checkWatermarks(m *machine, _ *process, _ time.Duration) ([]Finding, string) {
	if m.vm.MinFreeKbytes == nil || m.vm.WatermarkScaleFactor == nil || m.meminfo.MemTotal == nil {
		return nil, "/proc/sys/vm/min_free_kbytes or watermark_scale_factor not found"
	}
	total := int64(*m.meminfo.MemTotal)
	minFree, wsf := *m.vm.MinFreeKbytes, *m.vm.WatermarkScaleFactor
	e := []string{ev("/proc/sys/vm/min_free_kbytes", minFree), ev("/proc/sys/vm/watermark_scale_factor", wsf), ev("MemTotal", fmt.Sprintf("%d kB", total))}
	var out []Finding
	const large = 128 << 20 // 128 GiB in kB
	if total >= large && wsf <= 10 {
		out = append(out, Finding{Severity: Info,
			Title:    fmt.Sprintf("watermark_scale_factor=%d on a %d GiB machine: kswapd wakes late", wsf, total>>20),
			Evidence: e,
			Why:      "The gap between the low and min watermarks is 0.1% of memory per 10 of the factor. On a large machine with fast allocation bursts, kswapd cannot keep up inside that gap and threads fall into direct reclaim.",
			TradeOff: "A bigger gap keeps more memory free (0.5% of memory at 50), in exchange for fewer direct-reclaim stalls.",
			Fix:      "sysctl -w vm.watermark_scale_factor=50", Persist: persistSysctl("vm.watermark_scale_factor", 50)})
	}
	if minFree > total/20 {
		out = append(out, Finding{Severity: Warn,
			Title:    fmt.Sprintf("min_free_kbytes=%d is %.1f%% of memory", minFree, 100*float64(minFree)/float64(total)),
			Evidence: e,
			Why:      "min_free_kbytes is kept free for atomic allocations; set this high it is memory nothing can use, and the watermarks above it rise too, so reclaim runs early and often.",
			TradeOff: "The kernel's default (about 4·sqrt(memory in kB)) is enough for most machines; raise it only for bursts of atomic allocations (fast NICs).",
			Fix:      "sysctl -w vm.min_free_kbytes=" + fmt.Sprint(defaultMinFree(total)), Persist: persistSysctl("vm.min_free_kbytes", defaultMinFree(total))})
	}
	return out, ""
}

// defaultMinFree is the kernel's own choice for min_free_kbytes:
// 4·sqrt(lowmem kB), between 128 kB and 256 MiB (since 5.x: 262144).
func defaultMinFree(totalKB int64) int64 {
	v := int64(4)
	for r := int64(1); r*r <= totalKB*16; r++ {
		v = r
	}
	return min(max(v, 128), 262144)
}

// 9. NIC interrupts on another node than the process (or the NIC).
func checkIRQs(m *machine, p *process, _ time.Duration) ([]Finding, string) {
	if len(m.nodes) < 2 {
		return nil, ""
	}
	nics := readNICs(m)
	if len(nics) == 0 {
		return nil, "no physical network interface with MSI interrupts"
	}
	var out []Finding
	var irqbalance, irqbalanceRead bool
	for _, n := range nics {
		if len(n.irqs) == 0 {
			continue
		}
		// Against the process when it is bound to some nodes, else
		// against the NIC's own node.
		want := map[int]bool{}
		who := ""
		switch {
		case p != nil && bound(m, p):
			want, who = p.cpuNodes, fmt.Sprintf("pid %d", p.pid)
		case n.node >= 0:
			want[n.node], who = true, "the NIC"
		default:
			continue
		}
		overlap := false
		for nd := range n.irqNodes {
			overlap = overlap || want[nd]
		}
		if overlap || len(n.irqNodes) == 0 {
			continue
		}
		// Only a finding needs to know whether irqbalance runs: that is a
		// scan of every process.
		if !irqbalanceRead {
			irqbalance, irqbalanceRead = running(m, "irqbalance"), true
		}
		e := []string{ev("/sys/class/net/"+n.name+"/device/msi_irqs", n.irqs), ev("IRQ affinity nodes", nodeList(n.irqNodes)),
			ev(who+" nodes", nodeList(want)), ev("irqbalance running", irqbalance)}
		if n.node >= 0 {
			e = append(e, ev("/sys/class/net/"+n.name+"/device/numa_node", n.node))
		}
		f := Finding{Severity: Warn,
			Title:    fmt.Sprintf("%s's interrupts run on node %s, not where %s is (node %s)", n.name, nodeList(n.irqNodes), who, nodeList(want)),
			Evidence: e,
			Why:      "Packets are received into memory and processed on the CPU that takes the interrupt; when that is another node than the consuming threads, every packet crosses the interconnect twice and the socket buffers are remote.",
			TradeOff: "Pinning IRQs by hand means irqbalance must leave them alone; with several busy services on different nodes, pick the node of the NIC.",
			Fix:      fmt.Sprintf("for i in %s; do echo %s > /proc/irq/$i/smp_affinity_list; done", joinInts(n.irqs, " "), cpuList(m, want)),
			Persist:  "IRQBALANCE_BANNED_CPULIST= in /etc/default/irqbalance, or a systemd unit that sets the affinity at boot"}
		if irqbalance {
			f.TradeOff += " irqbalance is running and will move them back unless told not to."
		}
		out = append(out, f)
	}
	return out, ""
}

func joinInts(v []int, sep string) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, sep)
}

// pagesList is "N0=536 N1=16950" (4 KiB pages), nodes in order.
func pagesList(byNode map[int]int64) string {
	var ns []int
	for n := range byNode {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	var s []string
	for _, n := range ns {
		s = append(s, fmt.Sprintf("N%d=%d", n, byNode[n]))
	}
	return strings.Join(s, " ")
}

// cpuList is "0,1,2": the CPUs of the nodes, in order.
func cpuList(m *machine, nodes map[int]bool) string {
	var cpus []int
	for n := range nodes {
		cpus = append(cpus, m.nodeCPUs[n]...)
	}
	sort.Ints(cpus)
	return joinInts(cpus, ",")
}

// 10. Inside a container the knobs are the host's.
func checkContainer(m *machine, _ *process, _ time.Duration) ([]Finding, string) {
	if len(m.container) == 0 {
		return nil, ""
	}
	return []Finding{{Severity: Info,
		Title:    "running inside a container: these settings belong to the host",
		Evidence: m.container,
		Why:      "zone_reclaim_mode, THP, numa_balancing, huge pages and IRQ affinity are host-wide; changing them from a container changes every tenant, or fails.",
		TradeOff: "Fix them on the host (or its node image). For placement, use the orchestrator's topology management (the kubelet's Topology Manager with the static CPU manager and Memory Manager policies) instead of numactl in the pod.",
	}}, ""
}

// 11. PSI memory pressure, system-wide and for the process's cgroup.
func checkPSI(m *machine, p *process, _ time.Duration) ([]Finding, string) {
	if m.psi == nil {
		return nil, "/proc/pressure/memory not readable (PSI disabled: boot with psi=1)"
	}
	var out []Finding
	add := func(where string, st *procfs.PSIStats) {
		if st == nil || st.Some == nil {
			return
		}
		e := []string{ev(where+" some avg10", st.Some.Avg10), ev(where+" some avg60", st.Some.Avg60)}
		sev := Info
		switch {
		case st.Full != nil && st.Full.Avg10 >= 5:
			sev = Crit
		case st.Some.Avg10 >= 10:
			sev = Warn
		default:
			return
		}
		if st.Full != nil {
			e = append(e, ev(where+" full avg10", st.Full.Avg10))
		}
		out = append(out, Finding{Severity: sev,
			Title:    fmt.Sprintf("memory pressure in %s: tasks stalled on memory %.1f%% of the last 10 s", where, st.Some.Avg10),
			Evidence: e,
			Why:      "PSI counts the time tasks waited for memory (reclaim, refaults, compaction). \"full\" means every non-idle task waited at once: lost throughput.",
			TradeOff: "Raise the limit or the machine's memory, or find the stalling cause with numatrace attach.",
			Fix:      "numatrace attach --cgroup <the group> (which cause?)",
			Persist:  "size the group's memory limit (MemoryHigh=/MemoryMax= in its unit) to its working set"})
	}
	add("/proc/pressure/memory", m.psi)
	if p != nil && p.cgroup != "" {
		file := path.Join("sys/fs/cgroup", p.cgroup, "memory.pressure")
		if st, err := readPSI(m.path(file)); err == nil {
			add("/"+file, st)
		}
	}
	return out, ""
}

// kindPages sums a process's pages by kind and node.
func kindPages(ms []numamaps.Mapping) map[numamaps.Kind]map[int]int64 {
	out := map[numamaps.Kind]map[int]int64{}
	for _, mp := range ms {
		if out[mp.Kind] == nil {
			out[mp.Kind] = map[int]int64{}
		}
		for n, p := range mp.Pages {
			out[mp.Kind][n] += p
		}
	}
	return out
}

// bindNodes is the union of the nodes of every bind policy in numa_maps.
func bindNodes(ms []numamaps.Mapping) map[int]bool {
	out := map[int]bool{}
	for _, m := range ms {
		if list, ok := strings.CutPrefix(m.Policy, "bind:"); ok {
			if nodes, err := topology.ParseList(list); err == nil {
				for _, n := range nodes {
					out[n] = true
				}
			}
		}
	}
	return out
}
