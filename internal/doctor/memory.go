package doctor

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/prometheus/procfs"
)

// nodeShort tells whether a node is out of memory for user pages: its
// highest populated zone up to Normal (DMA32 on a small machine) is below
// its low watermark, and the zones below it have less than one watermark
// gap of it above their own low watermark plus their lowmem_reserve. The
// kernel checks each zone alone, a lower zone against its watermark plus
// that reserve, indexed by the allocation's highest zone (Movable, for
// user pages, when the kernel has that zone): so DMA and DMA32 free pages,
// however many, help only past it, and a node's summed free pages always
// look healthy on node 0, the one node that has those zones.
func nodeShort(zs []zone) (short bool, lines []string) {
	top, class := -1, -1
	for i, z := range zs {
		switch z.name {
		case "DMA", "DMA32", "Normal":
			if z.managed > 0 {
				top = i
			}
		case "Movable":
			class = i
		}
	}
	if top < 0 {
		return false, nil
	}
	if class < 0 {
		class = top
	}
	t := zs[top]
	var headroom int64
	for i := 0; i <= top; i++ {
		z := zs[i]
		if z.managed == 0 {
			continue
		}
		var reserve int64
		if class < len(z.protection) {
			reserve = z.protection[class]
		}
		line := fmt.Sprintf("%s free %d pages, low %d", z.name, z.free, z.low)
		if i < top {
			headroom += max(0, z.free-z.low-reserve)
			line += fmt.Sprintf(" + lowmem_reserve %d for user pages", reserve)
		}
		lines = append(lines, line)
	}
	return t.free < t.low && headroom < t.high-t.low, lines
}

// 10. A node below its low watermark while another has memory. Seed 004:
// MySQL's node 0 exhausted while node 1 was free, numa_miss in thousands
// per second; seed 000 (事故 A): the node-local pressure behind node reclaim.
func checkNodePressure(m *machine, p *process) ([]Finding, string) {
	if len(m.nodes) < 2 {
		return nil, ""
	}
	if len(m.zones) == 0 {
		return nil, "/proc/zoneinfo not readable"
	}
	var short, roomy []int
	var e []string
	for _, n := range m.nodes {
		s, lines := nodeShort(m.zones[n])
		free := m.memKB(n, "MemFree")
		e = append(e, fmt.Sprintf("node %d (MemFree %d MiB of %d MiB, FilePages %d MiB): %s", n, free>>10, m.memKB(n, "MemTotal")>>10,
			m.memKB(n, "FilePages")>>10, strings.Join(lines, "; ")))
		switch {
		case s:
			short = append(short, n)
		case free > m.memKB(n, "MemTotal")/10:
			roomy = append(roomy, n)
		}
	}
	// Seed 001 (踩坑): "--membind 把内存绑死导致 OOM": a process whose
	// memory may only come from a short node reclaims or dies there.
	var boundShort bool
	if p != nil && p.memBound(m) {
		mems, _ := allowedMems(p)
		boundShort = len(mems) > 0
		for n := range mems {
			boundShort = boundShort && slices.Contains(short, n)
		}
	}
	if len(short) == 0 || (len(roomy) == 0 && !boundShort) {
		return nil, ""
	}
	// One snapshot is not pressure: with zone_reclaim_mode=0 a node full of
	// page cache sits below low while allocations quietly go elsewhere.
	// Allocations turned away (numa_foreign) or direct reclaim, measured,
	// make it a warning.
	var pressed bool
	for _, n := range short {
		if g, ok := m.span.nodeGrew(n, "numa_foreign"); ok {
			pressed = pressed || g > 0
			e = append(e, fmt.Sprintf("node %d numa_foreign %.0f/s over %s (allocations meant for it that went elsewhere)", n, m.span.perSecond(g), m.span.d))
		}
	}
	stalls, _ := m.span.grewPrefix("allocstall_")
	pressed = pressed || stalls > 0
	if m.span.measured() {
		e = append(e, ev(fmt.Sprintf("allocstall_* growth over %s", m.span.d), stalls))
	} else {
		e = append(e, ev("allocstall_* growth", notMeasured))
	}
	if m.vm.ZoneReclaimMode != nil {
		e = append(e, ev("/proc/sys/vm/zone_reclaim_mode", *m.vm.ZoneReclaimMode))
	}
	title := fmt.Sprintf("node %s is below its low watermark for normal allocations while node %s has memory free",
		joinInts(short, ","), joinInts(roomy, ","))
	sev := Info
	if pressed {
		sev = Warn
	}
	if boundShort {
		mems, why := allowedMems(p)
		sev = Warn
		if stalls > 0 {
			sev = Crit
		}
		title = fmt.Sprintf("pid %d may only allocate on node %s, which is below its low watermark: it reclaims there, and is OOM-killed when that fails", p.pid, nodeList(mems))
		e = append(e, why, ev("pages per node", pagesList(p.pagesOn())))
	}
	f := Finding{Severity: sev,
		Title:    title,
		Evidence: e,
		Why: "Allocations that prefer the short node wake its kswapd and then either spill to the other node (numa_miss: remote memory) or, " +
			"bound to the node or with zone_reclaim_mode on, reclaim there in the allocating thread, although the machine has memory. " +
			"Seed 004: MySQL had 90% of its memory on node 0; when node 0 ran out its performance fell 40%.",
		TradeOff: "Interleaving the big process spreads it so no node runs out (seed 004), at the cost of half its accesses being remote; " +
			"binding it to the free node (CPUs too) keeps it local if it fits there; a bound process that outgrew its node needs a wider binding.",
		Fix:     "find who fills the node: numatrace doctor --pid PID for the largest processes (numastat -m, numastat -p)",
		Persist: "size each bound workload to its node's memory with 20% headroom (seed 001), or interleave the one that does not fit"}
	if boundShort {
		f.Fix = fmt.Sprintf("let it allocate on node %s too: migratepages is no help, widen the cpuset's cpuset.mems or restart under numactl --cpunodebind=N --membind=N on a node with room (node %s)",
			joinInts(roomy, ","), joinInts(roomy, ","))
		if len(roomy) == 0 {
			f.Fix = "shrink what it holds on the node (for a database, its buffer pool) or widen its memory binding: numactl --interleave=all if it needs more than one node"
		}
	}
	return []Finding{f}, ""
}

func meminfoOK(mi procfs.Meminfo) bool {
	return mi.HugePagesTotal != nil && mi.HugePagesFree != nil && mi.Hugepagesize != nil && mi.MemTotal != nil && mi.MemAvailable != nil
}

func hugeEvidence(m *machine) []string {
	mi := m.meminfo
	e := []string{ev("HugePages_Total", *mi.HugePagesTotal), ev("HugePages_Free", *mi.HugePagesFree),
		ev("HugePages_Rsvd", val(mi.HugePagesRsvd)), ev("Hugepagesize", fmt.Sprintf("%d kB", *mi.Hugepagesize)),
		ev("MemTotal", fmt.Sprintf("%d kB", *mi.MemTotal)), ev("MemAvailable", fmt.Sprintf("%d kB", *mi.MemAvailable))}
	for _, n := range m.nodes {
		if nm := m.nodeMem[n]; nm != nil {
			e = append(e, fmt.Sprintf("node %d: HugePages_Total %d, HugePages_Free %d, MemFree %d kB", n, nm["HugePages_Total"], nm["HugePages_Free"], nm["MemFree"]))
		}
	}
	return e
}

func val(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// 11. Explicit huge pages reserved and never used. Pages reserved for a
// mapping that has not faulted them in yet (HugePages_Rsvd) are spoken
// for: only Free − Rsvd is idle, and shrinking the pool below that would
// take them from under the database.
func checkHugepageUnused(m *machine, _ *process) ([]Finding, string) {
	mi := m.meminfo
	if !meminfoOK(mi) {
		return nil, "/proc/meminfo lacks HugePages_* or MemAvailable"
	}
	sizeKB := *mi.Hugepagesize
	idle := *mi.HugePagesFree - min(val(mi.HugePagesRsvd), *mi.HugePagesFree)
	idleKB := idle * sizeKB
	if *mi.HugePagesTotal == 0 || idleKB < *mi.MemTotal/20 { // under 5% of memory idle in the pool
		return nil, ""
	}
	keep := *mi.HugePagesTotal - idle
	sev := Warn
	if idleKB > *mi.MemAvailable {
		sev = Crit
	}
	return []Finding{{Severity: sev,
		Title:    fmt.Sprintf("%d MiB of explicit huge pages are neither in use nor reserved, while normal memory has %d MiB available", idleKB/1024, *mi.MemAvailable/1024),
		Evidence: hugeEvidence(m),
		Why: "Pages in the hugetlb pool are taken out of normal memory whether or not anything maps them (seed 000: \"预分配黑洞\"); the idle part " +
			"is memory every other allocation needs, so reclaim starts earlier.",
		TradeOff: "Shrinking returns only idle pages (in use and reserved ones stay); growing the pool again later may fail on fragmented memory, " +
			"so keep what is mapped and reserved plus headroom, and reserve at boot when it must grow.",
		Fix:     fmt.Sprintf("sysctl -w vm.nr_hugepages=%d", keep),
		Persist: persistSysctl("vm.nr_hugepages", keep) + " (or hugepages= on the kernel command line, which reserves before memory fragments)"}}, ""
}

// 12. A pool in use that leaves too little normal memory. Seed 000 (第三个
// 现场): 20 GiB of HugeTLB on a 128 GiB machine; agents of tens of MiB were
// OOM-killed and allocstall rose. The pool is "in use", so the idle-pool
// check is silent: the evidence is normal memory's pressure.
func checkHugepageStarvation(m *machine, _ *process) ([]Finding, string) {
	mi := m.meminfo
	if !meminfoOK(mi) {
		return nil, "/proc/meminfo lacks HugePages_* or MemAvailable"
	}
	poolKB := *mi.HugePagesTotal * *mi.Hugepagesize
	if mi.Hugetlb != nil && *mi.Hugetlb > poolKB {
		poolKB = *mi.Hugetlb // pools of every huge page size (1 GiB ones too)
	}
	if poolKB == 0 || poolKB < *mi.MemTotal/10 {
		return nil, ""
	}
	idle := *mi.HugePagesFree - min(val(mi.HugePagesRsvd), *mi.HugePagesFree)
	if idle**mi.Hugepagesize >= *mi.MemTotal/20 {
		return nil, "" // an idle pool: hugepage_reservation names it
	}
	normalKB := *mi.MemTotal - poolKB
	tight := float64(*mi.MemAvailable) < 0.10*float64(normalKB)
	stalls, measured := m.span.grewPrefix("allocstall_")
	kills, _ := m.span.grew("oom_kill")
	pressed := measured && (stalls > 0 || kills > 0)
	if !tight && !pressed {
		return nil, ""
	}
	if !tight && float64(*mi.MemAvailable) > 0.25*float64(normalKB) {
		return nil, "" // stalls with plenty available are not the pool's doing
	}
	e := hugeEvidence(m)
	e = append(e, ev("/proc/vmstat oom_kill (since boot)", m.span.latest().vmstat["oom_kill"]), m.span.growthEvidence("oom_kill"))
	if measured {
		e = append(e, ev(fmt.Sprintf("allocstall_* growth over %s", m.span.d), stalls))
	} else {
		e = append(e, ev("allocstall_* growth", notMeasured))
	}
	sev := Warn
	if pressed {
		sev = Crit
	}
	fix := fmt.Sprintf("sysctl -w vm.nr_hugepages=%d (returns the %d idle pages; the mapped and reserved ones stay)", *mi.HugePagesTotal-idle, idle)
	if idle == 0 {
		fix = "every pool page is mapped or reserved: lower the application's huge-page use (e.g. innodb_buffer_pool_size), restart it, then lower vm.nr_hugepages"
	}
	return []Finding{{Severity: sev,
		Title:    fmt.Sprintf("the %d MiB huge-page pool leaves normal memory %d MiB available of %d MiB", poolKB/1024, *mi.MemAvailable/1024, normalKB/1024),
		Evidence: e,
		Why: "HugeTLB pages serve only mappings that ask for them; everything else (other processes, the page cache, the kernel's slab and " +
			"network buffers) lives in what is left, and there it reclaims directly and gets OOM-killed (seed 000: agents killed after nr_hugepages went to 20 GiB).",
		TradeOff: "A smaller pool gives the database fewer huge pages (more TLB misses) but lets everything else live; size it as node memory " +
			"minus the database's other resident memory, every other process's, and the kernel's headroom (seed 000 went from 20 GiB to 8 GiB).",
		Fix:     fix,
		Persist: "reserve the right size at boot (hugepages= and default_hugepagesz= on the kernel command line, before memory fragments), not at run time"}}, ""
}

// 13. watermark_scale_factor on a large machine. Seed 000's tuning table:
// "vm.watermark_scale_factor: 大内存调 100~1000 / 别留默认 0.1%(缓冲带太小)".
// Measured direct reclaim makes it a warning.
func checkWatermarkScale(m *machine, _ *process) ([]Finding, string) {
	if m.vm.WatermarkScaleFactor == nil || m.meminfo.MemTotal == nil {
		return nil, "/proc/sys/vm/watermark_scale_factor not found"
	}
	total := int64(*m.meminfo.MemTotal)
	wsf := *m.vm.WatermarkScaleFactor
	const large = 120 << 20 // kB: a "128 GB" machine shows about 125 GiB of MemTotal
	if total < large || wsf > 10 {
		return nil, ""
	}
	stalls, measured := m.span.grewPrefix("allocstall_")
	scanned, _ := m.span.grew("pgscan_direct")
	e := []string{ev("/proc/sys/vm/watermark_scale_factor", wsf), ev("MemTotal", fmt.Sprintf("%d kB", total))}
	if measured {
		e = append(e, ev(fmt.Sprintf("allocstall_* growth over %s", m.span.d), stalls), m.span.growthEvidence("pgscan_direct"))
	} else {
		e = append(e, ev("allocstall_* growth", notMeasured))
	}
	// Direct reclaim that scanned pages, measured, is what a wider gap
	// prevents; a stall count alone can be high-order allocations.
	sev := Info
	if stalls > 0 && scanned > 0 {
		sev = Warn
	}
	zrm := m.vm.ZoneReclaimMode != nil && *m.vm.ZoneReclaimMode != 0
	f := Finding{Severity: sev,
		Title:    fmt.Sprintf("watermark_scale_factor=%d on a %d GiB machine: kswapd wakes only %.1f GiB before allocations stall", wsf, total>>20, float64(total)*float64(wsf)/10000/(1<<20)),
		Evidence: e,
		Why: "The gap between the low and min watermarks is 0.1% of memory per 10 of the factor. On a large machine with allocation bursts, kswapd " +
			"cannot keep up inside that gap and threads fall into direct reclaim (direct_reclaim stalls in numatrace).",
		TradeOff: "Seed 000 sets 100–1000 on large machines: each 100 keeps 1% of memory free (5 GiB on 512 GiB) in exchange for fewer direct-reclaim " +
			"stalls. Start at 100 and raise it while allocstall keeps growing.",
		Fix: "sysctl -w vm.watermark_scale_factor=100", Persist: persistSysctl("vm.watermark_scale_factor", 100)}
	if zrm {
		// Seed 000 (补遗一): raising the watermarks did not help while
		// zone_reclaim_mode was the cause.
		f.TradeOff += " zone_reclaim_mode is on: its node reclaim is counted here too, and seed 000 found raising watermarks no help until it was off; fix that first."
		f.Severity = Info
	}
	return []Finding{f}, ""
}

// 14. min_free_kbytes too large, or too small. Seed 000's table: "大内存适当调大
// / 别设极小(原子分配丢包)". Too small is below the kernel's own choice
// for this much memory (4·sqrt(lowmem kB)): someone lowered it.
func checkMinFree(m *machine, _ *process) ([]Finding, string) {
	if m.vm.MinFreeKbytes == nil || m.meminfo.MemTotal == nil {
		return nil, "/proc/sys/vm/min_free_kbytes not found"
	}
	total := int64(*m.meminfo.MemTotal)
	minFree := *m.vm.MinFreeKbytes
	def := defaultMinFree(lowmemKB(m, total))
	e := []string{ev("/proc/sys/vm/min_free_kbytes", minFree), ev("MemTotal", fmt.Sprintf("%d kB", total)),
		ev("the kernel's default for this memory", fmt.Sprintf("%d kB", def))}
	switch {
	case minFree > total/20:
		return []Finding{{Severity: Warn,
			Title:    fmt.Sprintf("min_free_kbytes=%d is %.1f%% of memory", minFree, 100*float64(minFree)/float64(total)),
			Evidence: e,
			Why:      "min_free_kbytes is kept free for atomic allocations; set this high it is memory nothing can use, and the watermarks above it rise too, so reclaim runs early and often.",
			TradeOff: "The kernel's default (about 4·sqrt(memory in kB), raised when THP is on) suits most machines; raise it only for bursts of atomic allocations (fast NICs).",
			Fix:      "sysctl -w vm.min_free_kbytes=" + fmt.Sprint(def), Persist: persistSysctl("vm.min_free_kbytes", def)}}, ""
	case minFree*10 < min(def, 65536)*9: // before 5.7 the kernel capped its default at 64 MiB
		return []Finding{{Severity: Warn,
			Title:    fmt.Sprintf("min_free_kbytes=%d is below the kernel's own default (about %d) for this memory", minFree, def),
			Evidence: e,
			Why: "The min watermark is the reserve for allocations that cannot wait (interrupt context, network receive). Set below the kernel's " +
				"choice, a burst empties it before kswapd reacts: atomic allocations fail and packets drop (seed 000), and direct reclaim comes sooner.",
			TradeOff: "A few MiB more kept free; large machines with fast NICs often want more than the default, never less.",
			Fix:      "sysctl -w vm.min_free_kbytes=" + fmt.Sprint(def), Persist: persistSysctl("vm.min_free_kbytes", def)}}, ""
	}
	return nil, ""
}

// lowmemKB is what the kernel sizes min_free_kbytes from: the managed
// pages above the high watermark of the zones up to Normal (Movable and
// hot-plugged memory are left out), or MemTotal without zoneinfo.
func lowmemKB(m *machine, total int64) int64 {
	var pages int64
	for _, zs := range m.zones {
		for _, z := range zs {
			if z.name == "DMA" || z.name == "DMA32" || z.name == "Normal" {
				pages += max(0, z.managed-z.high)
			}
		}
	}
	if pages == 0 {
		return total
	}
	return pages * 4
}

// defaultMinFree is the kernel's own choice for min_free_kbytes:
// 4·sqrt(lowmem kB), between 128 kB and 256 MiB (262144 since 5.7).
func defaultMinFree(totalKB int64) int64 {
	v := int64(4)
	for r := int64(1); r*r <= totalKB*16; r++ {
		v = r
	}
	return min(max(v, 128), 262144)
}

// 17. PSI memory pressure, system-wide and for the process's cgroup.
func checkPSI(m *machine, p *process) ([]Finding, string) {
	if m.psi == nil {
		return nil, "/proc/pressure/memory not readable (PSI disabled: boot with psi=1)"
	}
	var out []Finding
	// Not from the seeds: PSI's own scale. 10% "some" over 10 s is a
	// service waiting on memory a tenth of the time; 5% "full" is
	// throughput lost outright.
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
	if p != nil && p.cgroupPath != "" {
		file := path.Join("sys/fs/cgroup", p.cgroupPath, "memory.pressure")
		if st, err := readPSI(m.path(file)); err == nil {
			add("/"+file, st)
		}
	}
	return out, ""
}
