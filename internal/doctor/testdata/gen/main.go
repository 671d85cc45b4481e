// Command gen writes doctor's fixture machines: copies of /proc and /sys
// laid out as a real two-socket server lays them out (node 0 with DMA and
// DMA32 zones and their lowmem_reserve, watermarks computed as the kernel
// computes them, one stat file per thread), each taken twice a second
// apart (now/ and later/) so rates can be measured. base/ is a healthy
// machine; every other directory holds only the files that differ from
// base, and reproduces one incident of the seed reports or a near miss.
//
//	go run ./internal/doctor/testdata/gen
//
// TestFixturesAreGenerated fails when the files and this program disagree.
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

var out = flag.String("out", "internal/doctor/testdata/machines", "where to write the machines")

// machine is one fixture: the values a scenario changes.
type machine struct {
	nodeCPUs  [][]int
	nodeMemKB []int64
	zones     [][]zone // per node: DMA, DMA32, Normal, Movable, Device
	sysctl    map[string]string
	thp       [2]string // enabled, defrag
	hugePages hugePages
	memAvail  int64 // kB
	vmstat    counters
	numastat  []counters
	uptime    float64
	psi       string
	proc      *proc
	nics      []nic
	irqbal    bool
	files     map[string]string // anything else, path → content
	later     map[string]string // files that differ a second on (counters that grow)
}

type zone struct {
	name      string
	managed   int64
	free      int64
	freeLater int64
}

// hugePages is the 2 MiB pool; perNode, if set, is each node's
// {total, free} (else the pool is spread evenly, as the kernel does).
type hugePages struct {
	total, free, rsvd int64
	perNode           [][2]int64
}

// node is node n's part of the pool: {total, free}.
func (h hugePages) node(n, nodes int) [2]int64 {
	if h.perNode != nil {
		return h.perNode[n]
	}
	return [2]int64{h.total / int64(nodes), h.free / int64(nodes)}
}

// counters are a file's values now and their growth in a second.
type counters struct {
	now, grow map[string]int64
}

type proc struct {
	pid      int
	comm     string
	cpus     string
	mems     string
	maps     []string // numa_maps lines
	threads  []thread
	noTasks  bool // the copy lacks task/: no thread can be read
	cgroup   string
	cpuTicks [2]int64 // utime+stime of the process now and a second later
}

type thread struct {
	tid       int
	cpu       int
	ticks     int64
	growTicks int64
}

type nic struct {
	name string
	node int
	irqs []irq
}

type irq struct {
	num       int
	smp       string
	effective string
}

func cpus(ranges ...[2]int) []int {
	var out []int
	for _, r := range ranges {
		for c := r[0]; c <= r[1]; c++ {
			out = append(out, c)
		}
	}
	return out
}

// base is a healthy 2 × 16-core (32-thread) server with 128 GB, as in
// seeds 002 and 003, running a Java service bound to node 0 with its
// memory (seed 002's end state), THP madvise, NUMA balancing off.
func base() *machine {
	m := &machine{
		nodeCPUs:  [][]int{cpus([2]int{0, 15}, [2]int{32, 47}), cpus([2]int{16, 31}, [2]int{48, 63})},
		nodeMemKB: []int64{65373204, 66047404},
		zones: [][]zone{
			{{"DMA", 3840, 3800, 3800}, {"DMA32", 724000, 400000, 400000}, {"Normal", 15615000, 2217640, 2215000}, {"Movable", 0, 0, 0}, {"Device", 0, 0, 0}},
			{{"DMA", 0, 0, 0}, {"DMA32", 0, 0, 0}, {"Normal", 16511000, 13107200, 13100000}, {"Movable", 0, 0, 0}, {"Device", 0, 0, 0}},
		},
		sysctl: map[string]string{
			"vm/zone_reclaim_mode": "0", "vm/min_free_kbytes": "90112", "vm/watermark_scale_factor": "10",
			"vm/swappiness": "60", "kernel/numa_balancing": "0",
		},
		thp:      [2]string{"always [madvise] never", "always defer defer+madvise [madvise] never"},
		memAvail: 70000000,
		vmstat: counters{
			now: map[string]int64{"nr_free_pages": 15728640, "allocstall_dma": 0, "allocstall_dma32": 0, "allocstall_normal": 12, "allocstall_movable": 3,
				"pgscan_direct": 4000, "pgsteal_direct": 3500, "compact_stall": 5, "compact_fail": 1, "compact_success": 4,
				"numa_hit": 91000000, "numa_miss": 12000, "numa_foreign": 12000, "numa_interleave": 900, "numa_local": 90500000, "numa_other": 512000,
				"numa_pte_updates": 0, "numa_hint_faults": 0, "numa_hint_faults_local": 0, "numa_pages_migrated": 0,
				"zone_reclaim_failed": 0, "oom_kill": 0, "thp_fault_alloc": 300},
			grow: map[string]int64{"numa_hit": 21000, "numa_local": 20900, "numa_other": 100, "numa_miss": 20, "numa_foreign": 20},
		},
		numastat: []counters{
			{now: map[string]int64{"numa_hit": 60000000, "numa_miss": 2000, "numa_foreign": 10000, "interleave_hit": 450, "local_node": 59800000, "other_node": 202000},
				grow: map[string]int64{"numa_hit": 20000, "local_node": 19950, "other_node": 50, "numa_miss": 5, "numa_foreign": 15}},
			{now: map[string]int64{"numa_hit": 31000000, "numa_miss": 10000, "numa_foreign": 2000, "interleave_hit": 450, "local_node": 30700000, "other_node": 310000},
				grow: map[string]int64{"numa_hit": 1000, "local_node": 950, "other_node": 50, "numa_miss": 15, "numa_foreign": 5}},
		},
		uptime: 864000.00,
		psi:    "some avg10=0.12 avg60=0.05 avg300=0.01 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=2345\n",
		proc: &proc{pid: 4242, comm: "java", cpus: "0-15,32-47", mems: "0-1", cgroup: "0::/system.slice/quote-engine.service",
			maps: []string{
				"555500000000 bind:0 file=/usr/lib/jvm/java-17/bin/java mapped=16 N0=16 kernelpagesize_kB=4",
				"555600000000 bind:0 heap anon=51200 dirty=51200 N0=51200 kernelpagesize_kB=4",
				"7f0000000000 bind:0 anon=12582912 dirty=12582912 N0=12582912 kernelpagesize_kB=4",
				"7ffc00000000 bind:0 stack anon=64 dirty=64 N0=64 kernelpagesize_kB=4",
			},
			cpuTicks: [2]int64{3000000, 3000096}},
		nics: []nic{{name: "eth0", node: 0}},
	}
	for i := 0; i < 8; i++ {
		m.proc.threads = append(m.proc.threads, thread{tid: 4242 + i, cpu: m.nodeCPUs[0][i*3], ticks: 300000 + int64(i)*1000, growTicks: 12})
	}
	for q := 0; q < 8; q++ {
		c := m.nodeCPUs[0][q*2]
		m.nics[0].irqs = append(m.nics[0].irqs, irq{num: 120 + q, smp: "0-15,32-47", effective: fmt.Sprint(c)})
	}
	return m
}

func clone(m *machine) *machine {
	c := *m
	c.nodeCPUs = append([][]int(nil), m.nodeCPUs...)
	c.nodeMemKB = append([]int64(nil), m.nodeMemKB...)
	c.zones = nil
	for _, zs := range m.zones {
		c.zones = append(c.zones, append([]zone(nil), zs...))
	}
	c.sysctl = maps.Clone(m.sysctl)
	c.vmstat = counters{maps.Clone(m.vmstat.now), maps.Clone(m.vmstat.grow)}
	c.numastat = nil
	for _, n := range m.numastat {
		c.numastat = append(c.numastat, counters{maps.Clone(n.now), maps.Clone(n.grow)})
	}
	if m.proc != nil {
		p := *m.proc
		p.maps = append([]string(nil), m.proc.maps...)
		p.threads = append([]thread(nil), m.proc.threads...)
		c.proc = &p
	}
	c.nics = nil
	for _, n := range m.nics {
		n.irqs = append([]irq(nil), n.irqs...)
		c.nics = append(c.nics, n)
	}
	c.files = maps.Clone(m.files)
	c.later = maps.Clone(m.later)
	return &c
}

// spread puts the process's threads on both nodes, frac of them on node 0.
func (m *machine) spread(frac float64, n int) { // frac of n threads on node 0
	m.proc.threads = nil
	on0 := int(frac*float64(n) + 0.5)
	for i := 0; i < n; i++ {
		node, k := 0, i
		if i >= on0 {
			node, k = 1, i-on0
		}
		cpu := m.nodeCPUs[node][k%len(m.nodeCPUs[node])]
		m.proc.threads = append(m.proc.threads, thread{tid: m.proc.pid + i, cpu: cpu, ticks: 200000, growTicks: 90})
	}
}

// heap replaces the process's mappings: one anonymous region of mib MiB
// with the given policy and share on node 0.
func (m *machine) heap(policy string, mib int64, onNode0 float64) {
	pages := mib * 256
	n0 := int64(float64(pages) * onNode0)
	counts := fmt.Sprintf("N0=%d N1=%d", n0, pages-n0)
	if n0 == 0 {
		counts = fmt.Sprintf("N1=%d", pages)
	} else if n0 == pages {
		counts = fmt.Sprintf("N0=%d", pages)
	}
	m.proc.maps = []string{
		fmt.Sprintf("555500000000 %s file=/usr/sbin/%s mapped=16 N0=16 kernelpagesize_kB=4", policy, m.proc.comm),
		fmt.Sprintf("7f0000000000 %s anon=%d dirty=%d %s kernelpagesize_kB=4", policy, pages, pages, counts),
	}
}

// lowFree leaves about 0.4 GB free: every zone above its low watermark
// (no node is short), together 99,800 pages.
func (m *machine) lowFree() {
	m.zones[0][1].free, m.zones[0][1].freeLater = 20000, 20000
	m.zones[0][2].free, m.zones[0][2].freeLater = 30000, 30000
	m.zones[1][2].free, m.zones[1][2].freeLater = 46000, 46000
}

// The seed incidents, and near misses, by directory name.
var scenarios = map[string]func(m *machine){
	// Seed 000, 事故 A: zone_reclaim_mode=1 on a KV cache; node reclaim fails.
	"seed000_zone_reclaim": func(m *machine) {
		m.sysctl["vm/zone_reclaim_mode"] = "1"
		m.vmstat.now["zone_reclaim_failed"] = 731
		m.vmstat.grow["zone_reclaim_failed"] = 9
		m.vmstat.grow["pgscan_direct"] = 4200
	},
	// Seed 000, 事故 B and 补遗五: THP always/always, compaction stalls growing.
	"seed000_thp_always": func(m *machine) {
		m.thp = [2]string{"[always] madvise never", "[always] defer defer+madvise madvise never"}
		m.vmstat.now["compact_stall"] = 18250
		m.vmstat.grow["compact_stall"] = 12
	},
	// Seed 000, 第二个现场: bound to node 0 and using all 32 of its CPUs.
	"seed000_saturated_node": func(m *machine) {
		m.sysctl["kernel/numa_balancing"] = "1"
		m.proc.cpuTicks = [2]int64{3000000, 3000000 + 3150} // 31.5 CPUs at 100 Hz
		m.spread(1, 32)
		for i := range m.proc.threads {
			m.proc.threads[i].growTicks = 98
		}
	},
	// Seed 000, 第三个现场: 20 GiB of HugeTLB in use, agents OOM-killed.
	"seed000_hugetlb_starves": func(m *machine) {
		m.hugePages = hugePages{total: 10240, free: 0, rsvd: 0}
		m.memAvail = 5500000
		m.vmstat.now["oom_kill"] = 7
		m.vmstat.grow["oom_kill"] = 1
		m.vmstat.grow["allocstall_normal"] = 40
	},
	// Seed 000, 补遗一: numactl --interleave=all on a KV service that fits a node.
	"seed000_interleave_fits": func(m *machine) {
		m.proc.comm, m.proc.cpus = "kv_server", "0-63"
		m.heap("interleave:0-1", 16384, 0.5)
		m.spread(0.5, 16)
	},
	// Seed 000, 补遗二: --cpunodebind=0 --membind=1.
	"seed000_membind_mismatch": func(m *machine) {
		m.heap("bind:1", 8192, 0)
	},
	// Seed 000, 补遗三: zone_reclaim_mode set from a pod (cgroup v2, private namespace).
	"seed000_pod_zone_reclaim": func(m *machine) {
		m.sysctl["vm/zone_reclaim_mode"] = "1"
		m.files["proc/1/cgroup"] = "0::/\n"
		m.files["sys/fs/cgroup/memory.max"] = "8589934592\n"
		m.files["sys/fs/cgroup/cpu.max"] = "400000 100000\n"
		m.files["var/run/secrets/kubernetes.io/serviceaccount/namespace"] = "trading"
	},
	// Seed 000, 补遗四: irqbalance moved 7 of 8 queues to node 1.
	"seed000_nic_irqs": func(m *machine) {
		m.irqbal = true
		for q := 1; q < 8; q++ {
			m.nics[0].irqs[q].effective = fmt.Sprint(m.nodeCPUs[1][q])
			m.nics[0].irqs[q].smp = "16-31,48-63"
		}
	},
	// Seed 000, 补遗六: a pod whose CPUs are on node 0 and memory on node 1.
	"seed000_pod_cpu_only": func(m *machine) {
		m.proc.comm, m.proc.mems = "gateway", "0-1"
		m.proc.cgroup = "0::/kubepods.slice/kubepods-pod3f1c2a4e_9b7d_4c1e_8f21_6a0d5e4b7c11.slice/cri-containerd-8d2f0c1b.scope"
		m.heap("default", 8192, 0.3)
	},
	// Seed 000, tuning table: watermark_scale_factor left at 10 on 512 GB with
	// direct reclaim, and min_free_kbytes lowered far below the default.
	"seed000_tuning": func(m *machine) {
		m.nodeMemKB = []int64{263000000, 264000000}
		m.zones[0][2].managed, m.zones[1][2].managed = 65000000, 66000000
		m.sysctl["vm/min_free_kbytes"] = "16384"
		m.vmstat.grow["allocstall_normal"] = 35
		m.vmstat.grow["pgscan_direct"] = 6100
	},
	// Seed 001: MySQL unbound on 2×32C, numa_hit 61%, numa_miss ~38k/s.
	"seed001_mysql_unbound": func(m *machine) {
		m.proc.comm, m.proc.cpus = "mysqld", "0-63"
		m.proc.cgroup = "0::/system.slice/mysqld.service"
		m.heap("default", 40960, 0.55)
		m.spread(0.5, 32)
		m.numastat[0].grow = map[string]int64{"numa_hit": 31000, "numa_miss": 2000, "numa_foreign": 36000, "local_node": 22000, "other_node": 11000}
		m.numastat[1].grow = map[string]int64{"numa_hit": 28400, "numa_miss": 36000, "numa_foreign": 2000, "local_node": 52000, "other_node": 12400}
	},
	// Seed 001, 踩坑: --membind=0 with the buffer pool bigger than node 0 can hold.
	"seed001_membind_oom": func(m *machine) {
		m.zones[0][1].free, m.zones[0][1].freeLater = 64000, 63800
		m.zones[0][2].free, m.zones[0][2].freeLater = 12000, 11000
		m.vmstat.grow["allocstall_normal"] = 22
	},
	// Seed 002: the JVM unbound, 46% remote, NUMA balancing churning.
	"seed002_jvm_unbound": func(m *machine) {
		m.sysctl["kernel/numa_balancing"] = "1"
		m.proc.cpus, m.proc.mems = "0-63", "0-1"
		m.heap("default", 49152, 0.54)
		m.spread(0.5, 32)
		m.vmstat.now["numa_hint_faults"], m.vmstat.now["numa_hint_faults_local"], m.vmstat.now["numa_pages_migrated"] = 9e8, 4e8, 2e8
		m.vmstat.grow["numa_hint_faults"], m.vmstat.grow["numa_hint_faults_local"], m.vmstat.grow["numa_pages_migrated"] = 21000, 8600, 6100
	},
	// Seed 002, 踩坑 2: --cpunodebind=0 without --membind, 41% remote.
	"seed002_cpu_only": func(m *machine) {
		m.proc.mems = "0-1"
		m.heap("default", 49152, 0.59)
	},
	// Seed 003: an unbound job, 68% of its accesses local.
	"seed003_job_68_local": func(m *machine) {
		m.proc.comm, m.proc.cpus = "numa_job", "0-63"
		m.heap("default", 16384, 0.8)
		m.spread(0.8, 20)
	},
	// Seed 004: MySQL with 90% of its memory on node 0, node 0 exhausted.
	"seed004_node0_exhausted": func(m *machine) {
		m.proc.comm, m.proc.cpus = "mysqld", "0-63"
		m.heap("default", 61440, 0.9)
		m.spread(0.5, 24)
		// Normal drained below low; DMA32 near its lowmem_reserve for Normal.
		m.zones[0][1].free, m.zones[0][1].freeLater = 66000, 65900
		m.zones[0][2].free, m.zones[0][2].freeLater = 21000, 20800
		m.numastat[0].grow = map[string]int64{"numa_hit": 30000, "numa_miss": 0, "numa_foreign": 4500, "local_node": 29000, "other_node": 1000}
		m.numastat[1].grow = map[string]int64{"numa_hit": 3000, "numa_miss": 4500, "numa_foreign": 0, "local_node": 5000, "other_node": 2500}
	},
	// Seed 004's fix: the same MySQL interleaved, bigger than a node.
	"seed004_interleaved": func(m *machine) {
		m.proc.comm, m.proc.cpus = "mysqld", "0-63"
		m.heap("interleave:0-1", 61440, 0.5)
		m.spread(0.5, 24)
		// Interleaved pages: each node gets half, about half of them for a
		// CPU of the other node (seed 004: numa_miss 120/s after the fix).
		m.numastat[0].grow = map[string]int64{"numa_hit": 15000, "numa_miss": 60, "numa_foreign": 60, "interleave_hit": 14000, "local_node": 8000, "other_node": 7060}
		m.numastat[1].grow = map[string]int64{"numa_hit": 15000, "numa_miss": 60, "numa_foreign": 60, "interleave_hit": 14000, "local_node": 8000, "other_node": 7060}
	},

	// Near misses: each check's "ok" case.
	"ok_zone_reclaim_one_node": func(m *machine) { // zone_reclaim_mode=1 where there is one node: harmless
		m.sysctl["vm/zone_reclaim_mode"] = "1"
		m.nodeCPUs = [][]int{cpus([2]int{0, 63})}
		m.nodeMemKB = m.nodeMemKB[:1]
		m.zones = m.zones[:1]
		m.numastat = m.numastat[:1]
	},
	"ok_thp_defer": func(m *machine) { // enabled=always with defrag=defer: the seeds' recommendation
		m.thp = [2]string{"[always] madvise never", "always [defer] defer+madvise madvise never"}
		m.vmstat.grow["compact_stall"] = 3
	},
	"ok_cross_node_quiet": func(m *machine) { // 12% misses, but 150 pages/s: noise
		m.numastat[0].grow = map[string]int64{"numa_hit": 600, "numa_miss": 0, "numa_foreign": 150, "local_node": 590, "other_node": 10}
		m.numastat[1].grow = map[string]int64{"numa_hit": 500, "numa_miss": 150, "numa_foreign": 0, "local_node": 640, "other_node": 10}
	},
	"ok_remote_5pct": func(m *machine) { // bound to node 0 with 5% of its pages left on node 1
		m.heap("default", 49152, 0.95)
	},
	"bound_balancing_on": func(m *machine) { // bound, using 14 of its 32 CPUs, NUMA balancing on
		m.sysctl["kernel/numa_balancing"] = "1"
		m.proc.cpuTicks = [2]int64{3000000, 3001400}
	},
	"ok_thrash_settling": func(m *machine) { // balancing on, migrating 1 MiB/s with mostly local faults
		m.sysctl["kernel/numa_balancing"] = "1"
		m.proc.maps[1] = strings.Replace(m.proc.maps[1], "bind:0", "default", 1)
		m.proc.cpus = "0-63"
		m.vmstat.grow["numa_hint_faults"], m.vmstat.grow["numa_hint_faults_local"], m.vmstat.grow["numa_pages_migrated"] = 3000, 2700, 256
	},
	"ok_node_pressure_dma32": func(m *machine) { // node 0 Normal below low, but DMA32 has a gap's worth above its reserve
		m.zones[0][1].free, m.zones[0][1].freeLater = 300000, 300000
		m.zones[0][2].free, m.zones[0][2].freeLater = 21000, 20800
	},
	"ok_hugetlb_reserved": func(m *machine) { // 16 GiB pool, 12 GiB of it free but reserved by the database
		m.hugePages = hugePages{total: 8192, free: 6144, rsvd: 6144}
		m.memAvail = 50000000
	},
	// Seed 000, 第三个现场, caught earlier: the same 20 GiB pool on the 128 GB
	// machine, 2 GiB of it unused; MemFree 0.4 GB and memory PSI at 27%
	// while MemAvailable (page cache the workload keeps refaulting) still
	// reads 13 GiB. One reading: nothing measured grew yet.
	"seed000_hugetlb_psi": func(m *machine) {
		m.hugePages = hugePages{total: 10240, free: 1536, rsvd: 512}
		m.memAvail = 14000000
		m.lowFree()
		m.psi = "some avg10=27.00 avg60=22.40 avg300=12.10 total=987654321\nfull avg10=3.20 avg60=2.10 avg300=1.00 total=123456789\n"
	},
	// The near miss: the same pool, free memory and PSI, but a quarter of
	// normal memory and more available: reclaim has plenty to take, the
	// stalls are not the pool's doing.
	"ok_hugetlb_psi_available": func(m *machine) {
		m.hugePages = hugePages{total: 10240, free: 1536, rsvd: 512}
		m.memAvail = 40000000
		m.lowFree()
		m.psi = "some avg10=27.00 avg60=22.40 avg300=12.10 total=987654321\nfull avg10=3.20 avg60=2.10 avg300=1.00 total=123456789\n"
	},
	// The 20 GiB pool all on node 0 (set through node0's nr_hugepages, or
	// node 1 was too fragmented when it was reserved): node 0 has 0.2 GB
	// free while node 1 has 50 GB and the machine 40 GB available.
	"hugetlb_one_node": func(m *machine) {
		m.hugePages = hugePages{total: 10240, free: 512, rsvd: 0, perNode: [][2]int64{{10240, 512}, {0, 0}}}
		m.memAvail = 40000000
		m.zones[0][1].free, m.zones[0][1].freeLater = 20000, 20000
		m.zones[0][2].free, m.zones[0][2].freeLater = 27000, 27000
		m.psi = "some avg10=18.00 avg60=12.00 avg300=6.00 total=55555555\nfull avg10=1.50 avg60=1.00 avg300=0.50 total=4444444\n"
	},
	// An unbound process whose threads cannot be read (the copy has no
	// task/ directory): where it runs is not measured.
	"remote_not_measured": func(m *machine) {
		m.proc.comm, m.proc.cpus = "mysqld", "0-63"
		m.heap("default", 8192, 0.6)
		m.spread(0.5, 16)
		m.proc.noTasks = true
	},
	"seed000_hugetlb_unused": func(m *machine) { // 16 GiB pool, nothing maps or reserves 12 GiB of it
		m.hugePages = hugePages{total: 8192, free: 6144, rsvd: 0}
		m.memAvail = 9000000
	},
	"ok_min_free_default": func(m *machine) { // the kernel's own value without THP's raise
		m.sysctl["vm/min_free_kbytes"] = "45783"
	},
	"ok_min_free_large": func(m *machine) { // seed 000 raises it on big machines: 1 GiB of 512 GB is fine
		m.nodeMemKB = []int64{263000000, 264000000}
		m.sysctl["vm/min_free_kbytes"] = "1048576"
		m.sysctl["vm/watermark_scale_factor"] = "100"
	},
	"ok_irqs_spread_unbound": func(m *machine) { // unbound service, queues on both nodes: judged against the NIC's node
		m.proc.cpus = "0-63"
		m.heap("default", 4096, 1)
		for q := 4; q < 8; q++ { // the driver's default spread: half the queues on each node
			m.nics[0].irqs[q].smp = "0-63"
			m.nics[0].irqs[q].effective = fmt.Sprint(m.nodeCPUs[1][q])
		}
	},
	"nic_irqs_unbound_moved": func(m *machine) { // an unbound service, 7 of 8 queues away from the NIC's node: information
		m.proc.cpus = "0-63"
		m.heap("default", 4096, 1)
		for q := 1; q < 8; q++ {
			m.nics[0].irqs[q].effective = fmt.Sprint(m.nodeCPUs[1][q])
		}
	},
	"ok_container_v1_host": func(m *machine) { // a host on cgroup v1 with systemd: not a container
		m.files["proc/1/cgroup"] = "12:memory:/init.scope\n11:cpuset:/\n1:name=systemd:/init.scope\n0::/init.scope\n"
	},
	"seed000_container_v1": func(m *machine) { // docker on cgroup v1 (cgroupfs driver)
		m.files["proc/1/cgroup"] = "12:memory:/docker/4f2a9c\n11:cpuset:/docker/4f2a9c\n1:name=systemd:/docker/4f2a9c\n"
		m.files[".dockerenv"] = ""
	},
	// The memory cgroup of --pid at its limit: a redis-like service in a
	// 160 MiB cgroup v1 group, mostly page cache, its failcnt growing.
	"memcg_v1_at_limit": func(m *machine) {
		m.proc.cgroup = "12:memory:/numatrace-e2e-redis\n11:cpuset:/\n1:name=systemd:/system.slice/redis.service\n0::/system.slice/redis.service"
		g := "sys/fs/cgroup/memory/numatrace-e2e-redis/"
		m.files[g+"memory.limit_in_bytes"] = "167772160\n"
		m.files[g+"memory.max_usage_in_bytes"] = "167772160\n"
		m.files[g+"memory.oom_control"] = "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"
		m.files[g+"memory.usage_in_bytes"] = "166723584\n"
		m.files[g+"memory.failcnt"] = "1168\n"
		m.files[g+"memory.stat"] = "cache 0\nrss 0\nhierarchical_memory_limit 167772160\ntotal_cache 119537664\ntotal_rss 42991616\n"
		m.later = map[string]string{g + "memory.usage_in_bytes": "167116800\n", g + "memory.failcnt": "1234\n",
			g + "memory.stat": "cache 0\nrss 0\nhierarchical_memory_limit 167772160\ntotal_cache 120586240\ntotal_rss 41943040\n"}
		m.files["sys/fs/cgroup/memory/memory.limit_in_bytes"] = "9223372036854771712\n"
		m.files["sys/fs/cgroup/memory/memory.usage_in_bytes"] = "60000000000\n"
	},
	// cgroup v2: memory.high below memory.max, the service throttled there.
	"memcg_v2_high": func(m *machine) {
		renderMemcg(m.files, serviceGroup, memcgFiles{max: "68719476736", high: "42949672960", current: 42900000000,
			anon: 34359738368, file: 8589934592, events: "high 5000\nmax 0"})
		m.later = map[string]string{}
		renderMemcg(m.later, serviceGroup, memcgFiles{max: "68719476736", high: "42949672960", current: 42940000000,
			anon: 34359738368, file: 8589934592, events: "high 5340\nmax 0"})
	},
	// Near miss: a limit with room to spare, never hit.
	"ok_memcg_roomy": func(m *machine) {
		m.files[serviceGroup+"/memory.max"] = "68719476736\n"
	},
	"psi_pressure": func(m *machine) {
		m.files["sys/fs/cgroup/system.slice/quote-engine.service/memory.pressure"] = "some avg10=31.50 avg60=20.10 avg300=8.00 total=99999999\nfull avg10=8.25 avg60=5.00 avg300=2.00 total=5555555\n"
	},
}

func main() {
	flag.Parse()
	b := base()
	baseNow, baseLater := render(b, false), render(b, true)
	if err := os.RemoveAll(*out); err != nil {
		fail(err)
	}
	write(filepath.Join(*out, "base/now"), baseNow)
	write(filepath.Join(*out, "base/later"), baseLater)
	var names []string
	for name := range scenarios {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := clone(b)
		if m.files == nil {
			m.files = map[string]string{}
		}
		scenarios[name](m)
		write(filepath.Join(*out, name, "now"), diff(render(m, false), baseNow))
		write(filepath.Join(*out, name, "later"), diff(render(m, true), baseLater))
	}
}

// diff is what a scenario's tree changes; a file base has and the
// scenario does not is written as an empty ".absent" marker.
func diff(t, base map[string]string) map[string]string {
	d := map[string]string{}
	for p, c := range t {
		if base[p] != c {
			d[p] = c
		}
	}
	for p := range base {
		if _, ok := t[p]; !ok {
			d[p+".absent"] = ""
		}
	}
	return d
}

func write(dir string, t map[string]string) {
	for p, c := range t {
		path := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fail(err)
		}
		if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
			fail(err)
		}
	}
	if len(t) == 0 {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fail(err)
		}
		os.WriteFile(filepath.Join(dir, ".keep"), nil, 0o644)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}

func list(v []int) string {
	var b strings.Builder
	for i := 0; i < len(v); {
		j := i
		for j+1 < len(v) && v[j+1] == v[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if i == j {
			fmt.Fprintf(&b, "%d", v[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", v[i], v[j])
		}
		i = j + 1
	}
	return b.String()
}

// render writes the machine's files; later is the copy a second on.
func render(m *machine, later bool) map[string]string {
	t := map[string]string{}
	renderNodes(t, m, later)
	t["proc/zoneinfo"] = zoneinfo(m, later)
	for k, v := range m.sysctl {
		t["proc/sys/"+k] = v + "\n"
	}
	t["sys/kernel/mm/transparent_hugepage/enabled"] = m.thp[0] + "\n"
	t["sys/kernel/mm/transparent_hugepage/defrag"] = m.thp[1] + "\n"
	renderMemory(t, m)
	keys := sortedKeys(m.vmstat.now)
	t["proc/vmstat"] = pairs(m.vmstat.at(later), keys)
	up := m.uptime
	if later {
		up += 1
	}
	t["proc/uptime"] = fmt.Sprintf("%.2f %.2f\n", up, up*60)
	t["proc/pressure/memory"] = m.psi
	t["proc/1/comm"] = "systemd\n"
	t["proc/1/stat"] = stat(1, "systemd", 100, 0, 1)
	t["proc/1/cgroup"] = "0::/init.scope\n"
	if m.irqbal {
		t["proc/77/comm"] = "irqbalance\n"
		t["proc/77/stat"] = stat(77, "irqbalance", 10, 1, 1)
	}
	if m.proc != nil {
		renderProcess(t, m.proc, later)
	}
	renderNICs(t, m.nics)
	t["sys/fs/cgroup/system.slice/quote-engine.service/memory.pressure"] = "some avg10=0.00 avg60=0.00 avg300=0.00 total=100\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=10\n"
	renderMemcg(t, serviceGroup, memcgFiles{max: "max", high: "max", current: 42949672960, anon: 34359738368, file: 8589934592, events: "high 0\nmax 0"})
	renderMemcg(t, "sys/fs/cgroup/system.slice", memcgFiles{max: "max", high: "max", current: 53687091200})
	for k, v := range m.files {
		t[k] = v
	}
	if later {
		for k, v := range m.later {
			t[k] = v
		}
	}
	return t
}

// serviceGroup is the base machine's --pid's cgroup v2 group.
const serviceGroup = "sys/fs/cgroup/system.slice/quote-engine.service"

// memcgFiles are a cgroup v2 group's memory files.
type memcgFiles struct {
	max, high  string
	current    int64
	anon, file int64
	events     string // "high N\nmax N": the lines that are not 0
}

// renderMemcg writes the memory files of the cgroup v2 group in dir; a
// group without events has no memory.stat nor memory.events (a slice).
func renderMemcg(t map[string]string, dir string, g memcgFiles) {
	t[dir+"/memory.max"] = g.max + "\n"
	t[dir+"/memory.high"] = g.high + "\n"
	t[dir+"/memory.current"] = fmt.Sprint(g.current) + "\n"
	if g.events == "" {
		return
	}
	t[dir+"/memory.stat"] = fmt.Sprintf("anon %d\nfile %d\nkernel 104857600\n", g.anon, g.file)
	t[dir+"/memory.events"] = "low 0\n" + g.events + "\noom 0\noom_kill 0\noom_group_kill 0\n"
}

// at is the counters now, or a second on when later.
func (c counters) at(later bool) map[string]int64 {
	v := maps.Clone(c.now)
	if later {
		for k, g := range c.grow {
			v[k] += g
		}
	}
	return v
}

// renderNodes writes each node's CPUs, memory, huge pages and numastat,
// and the CPUs online.
func renderNodes(t map[string]string, m *machine, later bool) {
	var all []int
	for n, cs := range m.nodeCPUs {
		all = append(all, cs...)
		dir := fmt.Sprintf("sys/devices/system/node/node%d/", n)
		sorted := append([]int(nil), cs...)
		sort.Ints(sorted)
		t[dir+"cpulist"] = list(sorted) + "\n"
		free := int64(0)
		for _, z := range m.zones[n] {
			free += z.free
		}
		np := m.hugePages.node(n, len(m.nodeCPUs))
		hugeTotal, hugeFree := np[0], np[1]
		t[dir+"hugepages/hugepages-2048kB/nr_hugepages"] = fmt.Sprintf("%d\n", hugeTotal)
		t[dir+"hugepages/hugepages-2048kB/free_hugepages"] = fmt.Sprintf("%d\n", hugeFree)
		t[dir+"hugepages/hugepages-2048kB/surplus_hugepages"] = "0\n"
		t[dir+"meminfo"] = fmt.Sprintf("Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\nNode %d MemUsed:        %d kB\n"+
			"Node %d HugePages_Total: %5d\nNode %d HugePages_Free:  %5d\nNode %d HugePages_Surp:  %5d\n",
			n, m.nodeMemKB[n], n, free*4, n, m.nodeMemKB[n]-free*4, n, hugeTotal, n, hugeFree, n, 0)
		t[dir+"numastat"] = pairs(m.numastat[n].at(later), []string{"numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node"})
	}
	sort.Ints(all)
	t["sys/devices/system/cpu/online"] = list(all) + "\n"
}

// renderMemory writes the machine's meminfo and its 2 MiB huge-page pool.
func renderMemory(t map[string]string, m *machine) {
	var memTotal, free int64
	for n := range m.nodeCPUs {
		memTotal += m.nodeMemKB[n]
		for _, z := range m.zones[n] {
			free += z.free
		}
	}
	t["proc/meminfo"] = fmt.Sprintf("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\nBuffers:          102400 kB\nCached:         %d kB\n"+
		"HugePages_Total:   %d\nHugePages_Free:    %d\nHugePages_Rsvd:    %d\nHugePages_Surp:        0\nHugepagesize:       2048 kB\nHugetlb:        %d kB\n",
		memTotal, free*4, m.memAvail, m.memAvail/2, m.hugePages.total, m.hugePages.free, m.hugePages.rsvd, m.hugePages.total*2048)
	hp := "sys/kernel/mm/hugepages/hugepages-2048kB/"
	t[hp+"nr_hugepages"] = fmt.Sprintf("%d\n", m.hugePages.total)
	t[hp+"free_hugepages"] = fmt.Sprintf("%d\n", m.hugePages.free)
	t[hp+"resv_hugepages"] = fmt.Sprintf("%d\n", m.hugePages.rsvd)
	t[hp+"surplus_hugepages"] = "0\n"
}

// renderProcess writes the examined process's /proc files.
func renderProcess(t map[string]string, p *proc, later bool) {
	dir := fmt.Sprintf("proc/%d/", p.pid)
	ticks := p.cpuTicks[0]
	if later {
		ticks = p.cpuTicks[1]
	}
	t[dir+"comm"] = p.comm + "\n"
	t[dir+"stat"] = stat(p.pid, p.comm, ticks, p.threads[0].cpu, len(p.threads))
	t[dir+"cgroup"] = p.cgroup + "\n"
	t[dir+"numa_maps"] = strings.Join(p.maps, "\n") + "\n"
	t[dir+"status"] = fmt.Sprintf("Name:\t%s\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\nPPid:\t1\nThreads:\t%d\nCpus_allowed_list:\t%s\nMems_allowed_list:\t%s\nvoluntary_ctxt_switches:\t100\nnonvoluntary_ctxt_switches:\t10\n",
		p.comm, p.pid, p.pid, len(p.threads), p.cpus, p.mems)
	for _, th := range p.threads {
		if p.noTasks {
			break
		}
		tk := th.ticks
		if later {
			tk += th.growTicks
		}
		t[fmt.Sprintf("%stask/%d/stat", dir, th.tid)] = stat(th.tid, p.comm, tk, th.cpu, len(p.threads))
	}
}

// renderNICs writes each NIC's node and its MSI interrupts' affinities.
func renderNICs(t map[string]string, nics []nic) {
	for _, n := range nics {
		dev := "sys/class/net/" + n.name + "/device/"
		t[dev+"numa_node"] = fmt.Sprintf("%d\n", n.node)
		for _, q := range n.irqs {
			t[fmt.Sprintf("%smsi_irqs/%d", dev, q.num)] = "msix\n"
			t[fmt.Sprintf("proc/irq/%d/smp_affinity_list", q.num)] = q.smp + "\n"
			t[fmt.Sprintf("proc/irq/%d/effective_affinity_list", q.num)] = q.effective + "\n"
		}
	}
}

func sortedKeys(m map[string]int64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func pairs(v map[string]int64, order []string) string {
	var b strings.Builder
	for _, k := range order {
		fmt.Fprintf(&b, "%s %d\n", k, v[k])
	}
	return b.String()
}

// stat is a /proc/PID/stat line: utime+stime split 3:1, the last CPU in
// field 39.
func stat(pid int, comm string, ticks int64, cpu, threads int) string {
	return fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 5000 0 0 0 %d %d 0 0 20 0 %d 0 100 900000000 50000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 %d 0 0 0 0 0\n",
		pid, comm, pid, pid, ticks*3/4, ticks-ticks*3/4, threads, cpu)
}

// zoneinfo lays the zones out as the kernel prints them, with the
// watermarks and lowmem_reserve it computes from min_free_kbytes,
// watermark_scale_factor and the zones' managed pages.
func zoneinfo(m *machine, later bool) string {
	var minFree, wsf int64
	fmt.Sscan(m.sysctl["vm/min_free_kbytes"], &minFree)
	fmt.Sscan(m.sysctl["vm/watermark_scale_factor"], &wsf)
	var lowmem int64
	for _, zs := range m.zones {
		for _, z := range zs[:3] {
			lowmem += z.managed
		}
	}
	ratio := []int64{256, 256, 32, 0, 0}
	var b strings.Builder
	for n, zs := range m.zones {
		for i, z := range zs {
			minP := int64(0)
			if i < 3 && lowmem > 0 {
				minP = minFree / 4 * z.managed / lowmem
			} else if z.name == "Movable" {
				minP = 32
			}
			gap := max(minP/4, z.managed*wsf/10000)
			low, high := minP+gap, minP+2*gap
			prot := make([]string, len(zs))
			for j := range zs {
				var upper int64
				for k := i + 1; k <= j; k++ {
					upper += zs[k].managed
				}
				if j > i && ratio[i] > 0 && z.managed > 0 {
					prot[j] = fmt.Sprint(upper / ratio[i])
				} else {
					prot[j] = "0"
				}
			}
			free := z.free
			if later {
				free = z.freeLater
			}
			fmt.Fprintf(&b, "Node %d, zone %8s\n", n, z.name)
			if i == 0 {
				b.WriteString("  per-node stats\n      nr_inactive_anon 34023\n      nr_active_anon 49\n      nr_inactive_file 32948\n      nr_active_file 16384\n")
			}
			fmt.Fprintf(&b, "  pages free     %d\n        boost    0\n        min      %d\n        low      %d\n        high     %d\n        promo    %d\n"+
				"        spanned  %d\n        present  %d\n        managed  %d\n        cma      0\n        protection: (%s)\n      nr_free_pages %d\n"+
				"      nr_zone_inactive_anon 0\n      nr_zone_active_anon 0\n      numa_hit     0\n      numa_miss    0\n",
				free, minP, low, high, high+gap, z.managed+z.managed/50, z.managed+z.managed/100, z.managed, strings.Join(prot, ", "), free)
			fmt.Fprintf(&b, "  pagesets\n  node_unreclaimable:  0\n  start_pfn:           %d\n", 4096*(i+1))
		}
	}
	return b.String()
}
