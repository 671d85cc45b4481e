package doctor

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/hostfs"
)

// hugePool is the explicit (HugeTLB) huge pages of one page size: taken
// out of normal memory whether or not anything maps them.
type hugePool struct {
	sizeKB                     uint64
	total, free, rsvd, surplus uint64           // pages
	nodes                      map[int]nodePool // nil when the copy has no per-node counts
	dir                        string           // where the counts were read, for the evidence and the fix
	perNodeDir                 string           // under sys/devices/system/node/nodeN/hugepages, "" without
}

// nodePool is one node's part of a pool. The kernel keeps no per-node
// count of reserved pages: reserved ones are among the free.
type nodePool struct{ total, free uint64 }

// idle is the pages neither mapped nor reserved: Free − Rsvd. Reserved
// pages are promised to a mapping that has not faulted them in yet, and
// shrinking the pool below them would take them from under it.
func (p hugePool) idle() uint64 { return p.free - min(p.rsvd, p.free) }

func (p hugePool) kB(pages uint64) uint64 { return satMul(pages, p.sizeKB) }

func (p hugePool) name() string { return fmt.Sprintf("%d kB", p.sizeKB) }

func satMul(a, b uint64) uint64 {
	if b != 0 && a > math.MaxUint64/b {
		return math.MaxUint64
	}
	return a * b
}

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// readPools reads every page size's pool from /sys/kernel/mm/hugepages
// and, per node, from /sys/devices/system/node/nodeN/hugepages; a copy
// without them falls back to /proc/meminfo's default-size counts and the
// nodes' meminfo. No pool at all (a kernel without HugeTLB) is nil.
func readPools(m *machine) ([]hugePool, error) {
	const dir = "sys/kernel/mm/hugepages"
	ents, err := m.fs.ReadDir(dir)
	if hostfs.Absent(err) {
		return meminfoPool(m), nil
	}
	if err != nil {
		return nil, err
	}
	var out []hugePool
	for _, e := range ents {
		size, ok := strings.CutPrefix(e.Name(), "hugepages-")
		size, ok2 := strings.CutSuffix(size, "kB")
		kb, err := strconv.ParseUint(size, 10, 64)
		if !ok || !ok2 || err != nil || kb == 0 {
			continue
		}
		p := hugePool{sizeKB: kb, dir: dir + "/" + e.Name()}
		for _, f := range []struct {
			file string
			dst  *uint64
		}{{"nr_hugepages", &p.total}, {"free_hugepages", &p.free}, {"resv_hugepages", &p.rsvd}, {"surplus_hugepages", &p.surplus}} {
			if *f.dst, _, err = readUint(m.fs, p.dir+"/"+f.file); err != nil {
				return nil, err
			}
		}
		for _, n := range m.nodes {
			nd := fmt.Sprintf("sys/devices/system/node/node%d/hugepages/%s", n, e.Name())
			total, ok, err := readUint(m.fs, nd+"/nr_hugepages")
			if err != nil {
				return nil, err
			}
			free, _, err := readUint(m.fs, nd+"/free_hugepages")
			if err != nil {
				return nil, err
			}
			if ok {
				if p.nodes == nil {
					p.nodes = map[int]nodePool{}
				}
				p.nodes[n] = nodePool{total: total, free: free}
				p.perNodeDir = "hugepages/" + e.Name()
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func meminfoPool(m *machine) []hugePool {
	mi := m.meminfo
	size, ok1 := mi.get("Hugepagesize")
	total, ok2 := mi.get("HugePages_Total")
	if !ok1 || !ok2 || size == 0 {
		return nil
	}
	p := hugePool{sizeKB: size, total: total, free: mi["HugePages_Free"], rsvd: mi["HugePages_Rsvd"], surplus: mi["HugePages_Surp"], dir: "proc/meminfo"}
	for _, n := range m.nodes {
		if t, ok := m.nodeMem[n]["HugePages_Total"]; ok {
			if p.nodes == nil {
				p.nodes = map[int]nodePool{}
			}
			p.nodes[n] = nodePool{total: t, free: m.nodeMem[n]["HugePages_Free"]}
		}
	}
	return []hugePool{p}
}

// poolKB is the memory of every pool, and of its idle pages. Meminfo's
// Hugetlb, where larger, also counts sizes the copy has no sysfs for.
func poolKB(m *machine) (total, idle uint64) {
	for _, p := range m.pools {
		total = satAdd(total, p.kB(p.total))
		idle = satAdd(idle, p.kB(p.idle()))
	}
	if h, ok := m.meminfo.get("Hugetlb"); ok && h > total {
		total = h
	}
	return total, idle
}

// nodePoolKB is the memory of every pool on node n.
func nodePoolKB(m *machine, n int) (total, free uint64, known bool) {
	for _, p := range m.pools {
		if np, ok := p.nodes[n]; ok {
			known = true
			total, free = satAdd(total, p.kB(np.total)), satAdd(free, p.kB(np.free))
		}
	}
	return total, free, known
}

// defaultSizeKB is the size vm.nr_hugepages sets, 0 if unknown.
func defaultSizeKB(m *machine) uint64 { return m.meminfo["Hugepagesize"] }

func meminfoLacks(m *machine, keys ...string) string {
	var missing []string
	for _, k := range keys {
		if _, ok := m.meminfo.get(k); !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "/proc/meminfo lacks " + strings.Join(missing, ", ")
}

const noPools = "no huge-page pool: neither /sys/kernel/mm/hugepages nor HugePages_* in /proc/meminfo"

// poolEvidence is each pool as read, then each node's share of it.
func poolEvidence(m *machine) []string {
	var e []string
	for _, p := range m.pools {
		if p.dir == "proc/meminfo" {
			e = append(e, fmt.Sprintf("/proc/meminfo: HugePages_Total %d, HugePages_Free %d, HugePages_Rsvd %d, HugePages_Surp %d, Hugepagesize %d kB (%d MiB, %d MiB unused)",
				p.total, p.free, p.rsvd, p.surplus, p.sizeKB, p.kB(p.total)>>10, p.kB(p.idle())>>10))
		} else {
			e = append(e, fmt.Sprintf("/%s: nr_hugepages %d, free_hugepages %d, resv_hugepages %d, surplus_hugepages %d (%d MiB, %d MiB unused)",
				p.dir, p.total, p.free, p.rsvd, p.surplus, p.kB(p.total)>>10, p.kB(p.idle())>>10))
		}
		for _, n := range sortedKeys(p.nodes) {
			np := p.nodes[n]
			e = append(e, fmt.Sprintf("node %d: %s pages %d, free %d (%d MiB); MemTotal %d kB, MemFree %d kB", n, p.name(), np.total, np.free,
				p.kB(np.total)>>10, m.memKB(n, "MemTotal"), m.memKB(n, "MemFree")))
		}
	}
	return e
}

func sortedKeys[V any](m map[int]V) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// shrinkFix returns every pool's idle pages: the command per pool (the
// default size through vm.nr_hugepages), and "" when none is idle.
func shrinkFix(m *machine) (fix, persist string) {
	var fixes, persists []string
	for _, p := range m.pools {
		idle := p.idle()
		if p.total == 0 || idle == 0 {
			continue
		}
		keep := p.total - idle
		if p.sizeKB == defaultSizeKB(m) || p.dir == "proc/meminfo" {
			fixes = append(fixes, fmt.Sprintf("sysctl -w vm.nr_hugepages=%d", keep))
			persists = append(persists, persistSysctl("vm.nr_hugepages", keep))
		} else {
			fixes = append(fixes, fmt.Sprintf("echo %d > /%s/nr_hugepages", keep, p.dir))
			persists = append(persists, fmt.Sprintf("hugepagesz=%dK hugepages=%d on the kernel command line", p.sizeKB, keep))
		}
	}
	return strings.Join(fixes, " && "), strings.Join(persists, "; ")
}

// 11. Explicit huge pages reserved and never used. Pages reserved for a
// mapping that has not faulted them in yet (HugePages_Rsvd) are spoken
// for: only Free − Rsvd is idle, and shrinking the pool below that would
// take them from under the database.
func checkHugepageUnused(m *machine, _ *process) ([]Finding, string) {
	if s := meminfoLacks(m, "MemTotal", "MemAvailable"); s != "" {
		return nil, s
	}
	if len(m.pools) == 0 {
		return nil, noPools
	}
	memTotal, avail := m.meminfo["MemTotal"], m.meminfo["MemAvailable"]
	total, idleKB := poolKB(m)
	if total == 0 || idleKB < memTotal/20 { // under 5% of memory idle in the pool
		return nil, ""
	}
	sev := Warn
	if idleKB > avail {
		sev = Crit
	}
	fix, persist := shrinkFix(m)
	e := append(poolEvidence(m), ev("MemTotal", fmt.Sprintf("%d kB", memTotal)), ev("MemAvailable", fmt.Sprintf("%d kB", avail)))
	return []Finding{{Severity: sev,
		Title:    fmt.Sprintf("%d MiB of explicit huge pages are neither in use nor reserved, while normal memory has %d MiB available", idleKB>>10, avail>>10),
		Evidence: e,
		Why: "Pages in the hugetlb pool are taken out of normal memory whether or not anything maps them (a black hole allocated in advance); the idle part " +
			"is memory every other allocation needs, so reclaim starts earlier.",
		TradeOff: "Shrinking returns only idle pages (in use and reserved ones stay); growing the pool again later may fail on fragmented memory, " +
			"so keep what is mapped and reserved plus headroom, and reserve at boot when it must grow.",
		Fix:     fix,
		Persist: persist + " (or hugepages= on the kernel command line, which reserves before memory fragments)"}}, ""
}

// Normal memory is short when less than this share of it is available,
// or less than freeShort of it is free while tasks stall on memory.
// kswapd keeps free memory near the zones' high watermarks, a fraction
// of a percent of memory: below 1% free, allocations are being served by
// reclaim. Above roomyShare available, reclaim has plenty to take and
// stalls are not the pool's doing (a cgroup at its limit, say).
const (
	availShort = 0.10
	freeShort  = 0.01
	roomyShare = 0.25
	// A pool this share of memory (or of a node's) is large enough to be
	// the cause.
	poolShare = 0.10
	// A node whose share of its memory in the pool is this many times the
	// machine's holds the pool unevenly.
	unevenShare = 1.5
)

// stalling is the evidence that tasks wait for memory now: PSI, and
// direct reclaim or OOM kills measured over the interval.
type stalling struct {
	psiSome, psiFull float64 // avg10, -1 when unknown
	stalls, kills    uint64
	measured         bool // stalls and kills are growths over the interval
	evidence         []string
}

func (s stalling) pressed() bool {
	return s.psiSome >= psiWarnSome || (s.psiFull >= psiCritFull) || s.stalls > 0 || s.kills > 0
}

// lost: throughput lost outright (PSI full), or processes killed or
// stalled in direct reclaim, measured.
func (s stalling) lost() bool { return s.psiFull >= psiCritFull || s.stalls > 0 || s.kills > 0 }

func readStalling(m *machine) stalling {
	s := stalling{psiSome: -1, psiFull: -1}
	if m.psi != nil && m.psi.some != nil {
		s.psiSome = m.psi.some.avg10
		s.evidence = append(s.evidence, ev("/proc/pressure/memory some avg10", fmt.Sprintf("%.2f%%", s.psiSome)))
		if m.psi.full != nil {
			s.psiFull = m.psi.full.avg10
			s.evidence = append(s.evidence, ev("/proc/pressure/memory full avg10", fmt.Sprintf("%.2f%%", s.psiFull)))
		}
	} else {
		s.evidence = append(s.evidence, ev("/proc/pressure/memory", "not readable"))
	}
	s.evidence = append(s.evidence, ev("/proc/vmstat oom_kill (since boot)", m.span.latest().vmstat["oom_kill"]), m.span.growthEvidence("oom_kill"))
	var why string
	s.stalls, why = m.span.grewPrefix("allocstall_")
	kills, whyKills := m.span.growth("oom_kill")
	s.measured = why == "" && whyKills == ""
	if s.measured {
		s.kills = kills
		s.evidence = append(s.evidence, ev(fmt.Sprintf("allocstall_* growth over %s", m.span.d), s.stalls))
	} else {
		s.stalls = 0
		s.evidence = append(s.evidence, ev("allocstall_* growth", why))
	}
	return s
}

// 12. A pool that leaves normal memory too little. Seed 000 (第三个现场):
// 20 GiB of HugeTLB on a 128 GiB machine; agents of tens of MiB were
// OOM-killed and allocstall rose. Normal memory is judged by what is free
// and what is available together, with PSI and measured stalls: free
// memory alone is low on any busy machine (page cache fills it), and
// available memory alone counts page cache that a thrashing workload
// needs. A node holding most of a pool can starve while the machine has
// memory. An idle pool (5% of memory or more unused) is
// hugepage_reservation's: returning it is the fix.
func checkHugepageStarvation(m *machine, _ *process) ([]Finding, string) {
	if s := meminfoLacks(m, "MemTotal", "MemFree", "MemAvailable"); s != "" {
		return nil, s
	}
	if len(m.pools) == 0 {
		return nil, noPools
	}
	memTotal, free, avail := m.meminfo["MemTotal"], m.meminfo["MemFree"], m.meminfo["MemAvailable"]
	pool, idle := poolKB(m)
	if pool == 0 || idle >= memTotal/20 {
		return nil, ""
	}
	normal := memTotal - min(pool, memTotal)
	st := readStalling(m)
	short := float64(avail) < availShort*float64(normal) ||
		(float64(free) < freeShort*float64(normal) && st.pressed() && float64(avail) <= roomyShare*float64(normal))
	machine := float64(pool) >= poolShare*float64(memTotal) && short
	nodes := poolStarvedNodes(m, st, pool, memTotal)
	if !machine && len(nodes) == 0 {
		return nil, ""
	}
	sev := Warn
	if st.lost() {
		sev = Crit
	}
	e := append(poolEvidence(m), ev("MemTotal", fmt.Sprintf("%d kB", memTotal)), ev("MemFree", fmt.Sprintf("%d kB", free)),
		ev("MemAvailable", fmt.Sprintf("%d kB", avail)), fmt.Sprintf("normal memory (MemTotal less the pools) %d MiB", normal>>10))
	e = append(e, st.evidence...)
	stall := ""
	if st.psiSome >= psiWarnSome {
		stall = fmt.Sprintf(", and tasks stalled on memory %.0f%% of the last 10 s", st.psiSome)
	}
	f := hugepageStarvationFinding(sev, e)
	if machine {
		f.Title = fmt.Sprintf("the %s leaves normal memory %d MiB free and %d MiB available of %d MiB%s",
			poolTitle(m, pool, idle, memTotal), free>>10, avail>>10, normal>>10, stall)
		f.Fix = starvationFix(m, idle)
		return []Finding{f}, ""
	}
	wordUnevenPool(&f, m, nodes, poolTitle(m, pool, idle, memTotal), stall)
	return []Finding{f}, ""
}

// poolStarvedNodes are the nodes holding more than their share of the
// pool (half again the machine's share), which leaves them under 1% free
// while tasks stall.
func poolStarvedNodes(m *machine, st stalling, pool, memTotal uint64) []int {
	var nodes []int
	for _, n := range m.nodes {
		np, _, known := nodePoolKB(m, n)
		total := m.memKB(n, "MemTotal")
		if !known || total == 0 {
			continue
		}
		nodeNormal := total - min(np, total)
		uneven := float64(np)/float64(total) >= unevenShare*float64(pool)/float64(memTotal)
		if uneven && float64(np) >= poolShare*float64(total) && float64(m.memKB(n, "MemFree")) < freeShort*float64(nodeNormal) && st.pressed() {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// hugepageStarvationFinding is hugepage_starvation's wording, without
// its title and fix.
func hugepageStarvationFinding(sev Severity, e []string) Finding {
	return Finding{Severity: sev, Evidence: e,
		Why: "HugeTLB pages serve only mappings that ask for them; everything else (other processes, the page cache, the kernel's slab and " +
			"network buffers) lives in what is left, and there it reclaims directly and gets OOM-killed (in one incident, agents were killed after nr_hugepages went to 20 GiB).",
		TradeOff: "A smaller pool gives the database fewer huge pages (more TLB misses) but lets everything else live; size it as node memory " +
			"minus the database's other resident memory, every other process's, and the kernel's headroom (that incident went from 20 GiB to 8 GiB).",
		Persist: "reserve the right size at boot, before memory fragments: default_hugepagesz= hugepagesz= hugepages=N on the kernel command line " +
			"(per node, hugepages=0:N0,1:N1 since Linux 5.16), not at run time"}
}

// starvationFix is the fix for a pool that starves the machine: return
// what is unused, then shrink what maps the rest.
func starvationFix(m *machine, idle uint64) string {
	fix, _ := shrinkFix(m)
	if fix != "" {
		return fix + fmt.Sprintf(" (returns the %d MiB no mapping uses or has reserved); then lower what maps the rest (for MySQL innodb_buffer_pool_size), restart it, and shrink the pool to what it maps", idle>>10)
	}
	return "every pool page is mapped or reserved: lower the application's huge-page use (e.g. innodb_buffer_pool_size), restart it, then lower vm.nr_hugepages"
}

// wordUnevenPool words hugepage_starvation for a pool that starves the
// given nodes rather than the machine.
func wordUnevenPool(f *Finding, m *machine, nodes []int, title, stall string) {
	var where []string
	for _, n := range nodes {
		np, _, _ := nodePoolKB(m, n)
		where = append(where, fmt.Sprintf("node %d holds %d MiB of it (%.0f%% of the node) and has %d MiB free", n, np>>10,
			100*float64(np)/float64(m.memKB(n, "MemTotal")), m.memKB(n, "MemFree")>>10))
	}
	f.Title = fmt.Sprintf("the %s sits unevenly: %s%s", title, strings.Join(where, "; "), stall)
	f.Why += " A node whose part of the pool leaves it short reclaims there, or sends its allocations to another node (remote memory), although the machine has memory."
	f.TradeOff += " A pool placed on one node on purpose (DPDK beside its NIC, a database bound to that node) needs that node's memory: move the node's other tenants rather than the pool."
	f.Fix = spreadFix(m, nodes)
}

// poolTitle names the pools: "20480 MiB huge-page pool (10240 pages of
// 2048 kB, 16% of memory, 2048 MiB unused)".
func poolTitle(m *machine, pool, idle, memTotal uint64) string {
	var sizes []string
	for _, p := range m.pools {
		if p.total > 0 {
			sizes = append(sizes, fmt.Sprintf("%d pages of %s", p.total, p.name()))
		}
	}
	return fmt.Sprintf("%d MiB huge-page pool (%s, %.0f%% of memory, %d MiB unused)", pool>>10, strings.Join(sizes, " and "),
		100*float64(pool)/float64(memTotal), idle>>10)
}

// spreadFix moves a pool off the short nodes: their free pages now (a
// node gives back only those), the rest by evening the pool over the
// nodes while nothing maps it.
func spreadFix(m *machine, short []int) string {
	var now, even []string
	for _, p := range m.pools {
		if p.total == 0 || len(p.nodes) < 2 || p.perNodeDir == "" {
			continue
		}
		file := func(n int) string {
			return fmt.Sprintf("/sys/devices/system/node/node%d/%s/nr_hugepages", n, p.perNodeDir)
		}
		for _, n := range short {
			if np := p.nodes[n]; np.free > 0 {
				now = append(now, fmt.Sprintf("echo %d > %s", np.total-np.free, file(n)))
			}
		}
		per := (p.total + uint64(len(p.nodes)) - 1) / uint64(len(p.nodes))
		for _, n := range sortedKeys(p.nodes) {
			even = append(even, fmt.Sprintf("echo %d > %s", per, file(n)))
		}
	}
	if len(even) == 0 {
		return "spread the pool over the nodes (/sys/devices/system/node/nodeN/hugepages/hugepages-SIZE/nr_hugepages) while nothing maps it"
	}
	fix := ""
	if len(now) > 0 {
		fix = strings.Join(now, " && ") + " (returns node " + joinInts(short, ",") + "'s unused pages now); then "
	}
	return fix + "stop what maps the pool, spread it: " + strings.Join(even, " && ") + ", and restart it"
}
