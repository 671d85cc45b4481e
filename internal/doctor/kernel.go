package doctor

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/numatrace/numatrace/internal/topology"
)

const sysctlFile = "/etc/sysctl.d/90-numa.conf"

func persistSysctl(key string, v any) string {
	return fmt.Sprintf("echo '%s = %v' >> %s && sysctl --system", key, v, sysctlFile)
}

// nodeList is "0-1": the set's nodes as the kernel lists them.
func nodeList(set map[int]bool) string {
	var ns []int
	for n := range set {
		ns = append(ns, n)
	}
	return topology.FormatList(ns)
}

// 1. zone_reclaim_mode on a multi-node machine. Seed 000 (事故 A, 补遗一):
// a KV cache with 30–80 ms spikes at 30% CPU; "keep 0" is every seed's
// advice (001 step 1, 004 §4.2). Any zone_reclaim_failed is critical: node
// reclaim ran and did not even keep the allocation local.
func checkZoneReclaim(m *machine, _ *process) ([]Finding, string) {
	if m.vm.ZoneReclaimMode == nil {
		return nil, "/proc/sys/vm/zone_reclaim_mode not found (a kernel without NUMA)"
	}
	mode := *m.vm.ZoneReclaimMode
	if mode == 0 || len(m.nodes) < 2 {
		return nil, ""
	}
	latest := m.span.latest().vmstat
	f := Finding{Severity: Warn, Title: fmt.Sprintf("vm.zone_reclaim_mode=%d: allocations reclaim their own node before using another's free memory", mode),
		Evidence: []string{ev("/proc/sys/vm/zone_reclaim_mode", mode), ev("NUMA nodes", len(m.nodes)),
			ev("/proc/vmstat zone_reclaim_failed", latest["zone_reclaim_failed"]), m.span.growthEvidence("zone_reclaim_failed"),
			m.span.growthEvidence("pgscan_direct")},
		Why: "With node reclaim on, a thread whose local node is short of free pages stalls reclaiming (and, with bit 2 or 4, writing back or unmapping) " +
			"page cache on that node while the other nodes have memory free: periodic spikes while the CPU looks idle. The stalls are node_reclaim in numatrace.",
		TradeOff: "Off, allocations spill to a remote node: slower access to that data (1.4–2× latency), but no reclaim stall. Only workloads " +
			"partitioned per node that cannot tolerate remote memory, and accept reclaim stalls, benefit from it on; bind them with numactl instead.",
		Fix: "sysctl -w vm.zone_reclaim_mode=0", Persist: persistSysctl("vm.zone_reclaim_mode", 0)}
	failed := latest["zone_reclaim_failed"] > 0 // since boot, from one reading
	if g, ok := m.span.grew("zone_reclaim_failed"); ok {
		failed = g > 0
	}
	if failed {
		f.Severity = Crit
	}
	return []Finding{f}, ""
}

// 2. THP enabled=always with defrag=always. Seed 000 (事故 B, 补遗五):
// MySQL froze 1–3 s in synchronous compaction; malloc stalls of
// 50–200 ms. compact_stall growing while it is set is critical.
func checkTHP(m *machine, _ *process) ([]Finding, string) {
	if m.thpEnabled == "" {
		return nil, "no transparent huge pages in this kernel"
	}
	if m.thpEnabled != "always" || m.thpDefrag != "always" {
		return nil, ""
	}
	f := Finding{Severity: Warn, Title: "THP enabled=always with defrag=always: every huge-page fault may compact memory synchronously",
		Evidence: []string{ev("/sys/kernel/mm/transparent_hugepage/enabled", m.thpEnabled),
			ev("/sys/kernel/mm/transparent_hugepage/defrag", m.thpDefrag),
			ev("/proc/vmstat compact_stall", m.span.latest().vmstat["compact_stall"]), m.span.growthEvidence("compact_stall")},
		Why: "defrag=always makes a thread that faults in a huge page reclaim and compact memory right there when no 2 MiB page is free: " +
			"milliseconds to seconds of direct compaction in the allocating thread (compaction stalls in numatrace).",
		TradeOff: "defrag=defer or madvise stops the synchronous compaction and leaves it to kcompactd and khugepaged: a little less huge-page " +
			"coverage (one incident measured about 3% of MySQL's throughput, worth it). Databases that map huge pages explicitly (HugeTLB) " +
			"usually want enabled=never; services that want THP keep enabled=always with defrag=defer.",
		Fix: "echo madvise > /sys/kernel/mm/transparent_hugepage/defrag",
		// No boot parameter sets defrag (transparent_hugepage= sets enabled).
		Persist: "a tmpfiles.d line: echo 'w /sys/kernel/mm/transparent_hugepage/defrag - - - - madvise' > /etc/tmpfiles.d/thp.conf"}
	if g, ok := m.span.grew("compact_stall"); ok && g > 0 {
		f.Severity = Crit
	}
	return []Finding{f}, ""
}

func joinInts(v []int, sep string) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, sep)
}

// perNode is "N0=… N1=…", nodes in order.
func perNode[V any](byNode map[int]V, value func(V) string) string {
	var s []string
	for _, n := range slices.Sorted(maps.Keys(byNode)) {
		s = append(s, fmt.Sprintf("N%d=%s", n, value(byNode[n])))
	}
	return strings.Join(s, " ")
}

// pagesList is "N0=536 N1=16950" (4 KiB pages).
func pagesList(byNode map[int]int64) string {
	return perNode(byNode, func(v int64) string { return fmt.Sprint(v) })
}

// sharesList is "N0=62% N1=38%".
func sharesList(shares map[int]float64) string {
	return perNode(shares, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })
}

// cpuList is "0-15,32-47": the CPUs of the nodes.
func cpuList(m *machine, nodes map[int]bool) string {
	var cpus []int
	for n := range nodes {
		cpus = append(cpus, m.nodeCPUs[n]...)
	}
	return topology.FormatList(cpus)
}
