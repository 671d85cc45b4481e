package doctor

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/sanitize"
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
	var headroom uint64
	for i := 0; i <= top; i++ {
		z := zs[i]
		if z.managed == 0 {
			continue
		}
		var reserve uint64
		if class < len(z.protection) {
			reserve = z.protection[class]
		}
		line := fmt.Sprintf("%s free %d pages, low %d", sanitize.Text(z.name), z.free, z.low)
		if i < top {
			if floor := satAdd(z.low, reserve); z.free > floor {
				headroom = satAdd(headroom, z.free-floor)
			}
			line += fmt.Sprintf(" + lowmem_reserve %d for user pages", reserve)
		}
		lines = append(lines, line)
	}
	return t.free < t.low && headroom < t.high-min(t.low, t.high), lines
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
	np := classifyNodes(m)
	np.boundShort = boundToShortNodes(m, p, np.short)
	if len(np.short) == 0 || (len(np.roomy) == 0 && !np.boundShort) {
		return nil, ""
	}
	np.measurePressure(m)
	return []Finding{np.finding(p)}, ""
}

// nodePressure is what checkNodePressure found: the nodes short of memory
// and those with room, and whether allocations were turned away.
type nodePressure struct {
	short, roomy []int
	// boundShort: the process may only allocate on short nodes.
	boundShort bool
	// pressed: a short node turned allocations away, or reclaim stalled.
	pressed  bool
	stalls   uint64 // allocstall_* growth
	evidence []string
}

// classifyNodes sorts the nodes into short (below the low watermark for
// user pages) and roomy (a tenth or more of their memory free).
func classifyNodes(m *machine) nodePressure {
	var np nodePressure
	for _, n := range m.nodes {
		s, lines := nodeShort(m.zones[n])
		free := m.memKB(n, "MemFree")
		np.evidence = append(np.evidence, fmt.Sprintf("node %d (MemFree %d MiB of %d MiB, FilePages %d MiB): %s", n, free>>10, m.memKB(n, "MemTotal")>>10,
			m.memKB(n, "FilePages")>>10, strings.Join(lines, "; ")))
		switch {
		case s:
			np.short = append(np.short, n)
		case free > m.memKB(n, "MemTotal")/10:
			np.roomy = append(np.roomy, n)
		}
	}
	return np
}

// boundToShortNodes tells whether p's memory may only come from short
// nodes. Seed 001 (踩坑): "--membind 把内存绑死导致 OOM": such a process
// reclaims or dies there.
func boundToShortNodes(m *machine, p *process, short []int) bool {
	if p == nil || !p.memBound(m) {
		return false
	}
	mems, _ := allowedMems(p)
	boundShort := len(mems) > 0
	for n := range mems {
		boundShort = boundShort && slices.Contains(short, n)
	}
	return boundShort
}

// measurePressure adds what makes a short node pressure. One snapshot is
// not pressure: with zone_reclaim_mode=0 a node full of page cache sits
// below low while allocations quietly go elsewhere. Allocations turned
// away (numa_foreign) or direct reclaim, measured, make it a warning.
func (np *nodePressure) measurePressure(m *machine) {
	for _, n := range np.short {
		switch g, why := m.span.nodeGrowth(n, "numa_foreign"); {
		case why == "":
			np.pressed = np.pressed || g > 0
			np.evidence = append(np.evidence, fmt.Sprintf("node %d numa_foreign %.0f/s over %s (allocations meant for it that went elsewhere)", n, m.span.perSecond(g), m.span.d))
		case m.span.measured():
			np.evidence = append(np.evidence, fmt.Sprintf("node %d numa_foreign growth = %s", n, why))
		}
	}
	stalls, why := m.span.grewPrefix("allocstall_")
	np.stalls = stalls
	np.pressed = np.pressed || stalls > 0
	if why == "" {
		np.evidence = append(np.evidence, ev(fmt.Sprintf("allocstall_* growth over %s", m.span.d), stalls))
	} else {
		np.evidence = append(np.evidence, ev("allocstall_* growth", why))
	}
	if m.vm.ZoneReclaimMode != nil {
		np.evidence = append(np.evidence, ev("/proc/sys/vm/zone_reclaim_mode", *m.vm.ZoneReclaimMode))
	}
}

// finding words what np found.
func (np *nodePressure) finding(p *process) Finding {
	e := np.evidence
	title := fmt.Sprintf("node %s is below its low watermark for normal allocations while node %s has memory free",
		joinInts(np.short, ","), joinInts(np.roomy, ","))
	sev := Info
	if np.pressed {
		sev = Warn
	}
	if np.boundShort {
		mems, why := allowedMems(p)
		sev = Warn
		if np.stalls > 0 {
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
			"In one incident, MySQL had 90% of its memory on node 0; when node 0 ran out its performance fell 40%.",
		TradeOff: "Interleaving the big process spreads it so no node runs out, at the cost of half its accesses being remote; " +
			"binding it to the free node (CPUs too) keeps it local if it fits there; a bound process that outgrew its node needs a wider binding.",
		Fix:     "find who fills the node: numatrace doctor --pid PID for the largest processes (numastat -m, numastat -p)",
		Persist: "size each bound workload to its node's memory with 20% headroom, or interleave the one that does not fit"}
	if np.boundShort {
		f.Fix = fmt.Sprintf("let it allocate on node %s too: migratepages is no help, widen the cpuset's cpuset.mems or restart under numactl --cpunodebind=N --membind=N on a node with room (node %s)",
			joinInts(np.roomy, ","), joinInts(np.roomy, ","))
		if len(np.roomy) == 0 {
			f.Fix = "shrink what it holds on the node (for a database, its buffer pool) or widen its memory binding: numactl --interleave=all if it needs more than one node"
		}
	}
	return f
}

// 13. watermark_scale_factor on a large machine. Seed 000's tuning table:
// "vm.watermark_scale_factor: 大内存调 100~1000 / 别留默认 0.1%(缓冲带太小)".
// Measured direct reclaim makes it a warning.
func checkWatermarkScale(m *machine, _ *process) ([]Finding, string) {
	memTotal, ok := m.meminfo.get("MemTotal")
	if m.vm.WatermarkScaleFactor == nil || !ok {
		return nil, "/proc/sys/vm/watermark_scale_factor not found"
	}
	total := memTotal
	wsf := *m.vm.WatermarkScaleFactor
	const large = 120 << 20 // kB: a "128 GB" machine shows about 125 GiB of MemTotal
	if total < large || wsf > 10 {
		return nil, ""
	}
	stalls, why := m.span.grewPrefix("allocstall_")
	scanned, whyScanned := m.span.growth("pgscan_direct")
	e := []string{ev("/proc/sys/vm/watermark_scale_factor", wsf), ev("MemTotal", fmt.Sprintf("%d kB", total))}
	if why == "" {
		e = append(e, ev(fmt.Sprintf("allocstall_* growth over %s", m.span.d), stalls), m.span.growthEvidence("pgscan_direct"))
	} else {
		e = append(e, ev("allocstall_* growth", why))
	}
	if whyScanned != "" {
		scanned = 0
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
		TradeOff: "Large machines are best at 100–1000: each 100 keeps 1% of memory free (5 GiB on 512 GiB) in exchange for fewer direct-reclaim " +
			"stalls. Start at 100 and raise it while allocstall keeps growing.",
		Fix: "sysctl -w vm.watermark_scale_factor=100", Persist: persistSysctl("vm.watermark_scale_factor", 100)}
	if zrm {
		// Seed 000 (补遗一): raising the watermarks did not help while
		// zone_reclaim_mode was the cause.
		f.TradeOff += " zone_reclaim_mode is on: its node reclaim is counted here too, and in one incident raising watermarks did not help until it was off; fix that first."
		f.Severity = Info
	}
	return []Finding{f}, ""
}

// 14. min_free_kbytes too large, or too small. Seed 000's table: "大内存适当调大
// / 别设极小(原子分配丢包)". Too small is below the kernel's own choice
// for this much memory (4·sqrt(lowmem kB)): someone lowered it.
func checkMinFree(m *machine, _ *process) ([]Finding, string) {
	memTotal, ok := m.meminfo.get("MemTotal")
	if m.vm.MinFreeKbytes == nil || !ok || memTotal > math.MaxInt64 {
		return nil, "/proc/sys/vm/min_free_kbytes not found"
	}
	total := int64(memTotal)
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
				"choice, a burst empties it before kswapd reacts: atomic allocations fail and packets drop, and direct reclaim comes sooner.",
			TradeOff: "A few MiB more kept free; large machines with fast NICs often want more than the default, never less.",
			Fix:      "sysctl -w vm.min_free_kbytes=" + fmt.Sprint(def), Persist: persistSysctl("vm.min_free_kbytes", def)}}, ""
	}
	return nil, ""
}

// lowmemKB is what the kernel sizes min_free_kbytes from: the managed
// pages above the high watermark of the zones up to Normal (Movable and
// hot-plugged memory are left out), or MemTotal without zoneinfo.
func lowmemKB(m *machine, total int64) int64 {
	var pages uint64
	for _, zs := range m.zones {
		for _, z := range zs {
			if (z.name == "DMA" || z.name == "DMA32" || z.name == "Normal") && z.managed > z.high {
				pages = satAdd(pages, z.managed-z.high)
			}
		}
	}
	if pages == 0 {
		return total
	}
	return int64(min(satMul(pages, 4), math.MaxInt64))
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

// PSI's own scale, not the seeds': 10% "some" over 10 s is a service
// waiting on memory a tenth of the time; 5% "full" is throughput lost
// outright.
const (
	psiWarnSome = 10
	psiCritFull = 5
)

// 17. PSI memory pressure, system-wide and for the process's cgroup.
func checkPSI(m *machine, p *process) ([]Finding, string) {
	if m.psi == nil {
		return nil, "/proc/pressure/memory not readable (PSI disabled: boot with psi=1)"
	}
	var out []Finding
	// The next step names what to trace: the process's group for the
	// group's figure; for the machine's, which counts every process, the
	// process (is the pressure its?) or, with no process, the machine.
	add := func(where, fix string, st *psiStats) {
		if st == nil || st.some == nil {
			return
		}
		e := []string{ev(where+" some avg10", st.some.avg10), ev(where+" some avg60", st.some.avg60)}
		sev := Info
		switch {
		case st.full != nil && st.full.avg10 >= psiCritFull:
			sev = Crit
		case st.some.avg10 >= psiWarnSome:
			sev = Warn
		default:
			return
		}
		if st.full != nil {
			e = append(e, ev(where+" full avg10", st.full.avg10))
		}
		out = append(out, Finding{Severity: sev,
			Title:    fmt.Sprintf("memory pressure in %s: tasks stalled on memory %.1f%% of the last 10 s", where, st.some.avg10),
			Evidence: e,
			Why:      "PSI counts the time tasks waited for memory (reclaim, refaults, compaction). \"full\" means every non-idle task waited at once: lost throughput.",
			TradeOff: "Raise the limit or the machine's memory, or find the stalling cause with numatrace attach.",
			Fix:      fix,
			Persist:  "size the group's memory limit (MemoryHigh=/MemoryMax= in its unit) to its working set"})
	}
	machineFix := "numatrace attach -d 60s (the whole machine: which processes' threads stall, and in which cause)"
	if p != nil {
		machineFix = fmt.Sprintf("numatrace attach -p %d -d 60s (whether its own threads stall, and in which cause: this figure counts every process on the machine)", p.pid)
	}
	add("/proc/pressure/memory", machineFix, m.psi)
	if p != nil && p.cgroupPath != "" {
		group := path.Clean("/" + p.cgroupPath)
		file := path.Join("sys/fs/cgroup", group, "memory.pressure")
		st, err := readPSI(m.fs, file)
		switch {
		case err == nil:
			add(sanitize.Text("/"+file), sanitize.Text(fmt.Sprintf("numatrace attach --cgroup %s -d 60s (which of the group's threads stall, and in which cause)", group)), st)
		case !hostfs.Absent(err):
			return out, "the process's cgroup memory.pressure: " + err.Error()
		}
	}
	return out, ""
}
