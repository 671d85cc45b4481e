//go:build linux

// Package tracer loads numatrace's BPF programs, attaches each probe on its
// own, reads the ring buffer and the kernel-side histograms, and decodes
// them into stall types. It prints nothing: callers decide what to show.
package tracer

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/topology"
)

// FilterKind selects what the kernel side traces.
type FilterKind int

const (
	FilterNone FilterKind = iota // system-wide
	FilterPIDs                   // the processes in Config.PIDs (and, with FollowForks, their descendants)
	FilterTID                    // one thread
)

// Config says what to trace.
type Config struct {
	Filter FilterKind
	PIDs   []uint32 // FilterPIDs: initial processes
	TID    uint32   // FilterTID
	// FollowForks (FilterPIDs): a traced process's new child processes
	// are added in the kernel as they fork (--cgroup, --pid --children).
	FollowForks bool
	// CgroupID, with FollowForks, is the inode of the --cgroup directory:
	// processes moved into it (or below it) are added in the kernel too.
	CgroupID uint64
	// WatchChildren (FilterPIDs with one process, no FollowForks): the
	// process's descendants are not traced, but the kernel adds up their
	// stalls (Snapshot.Descendants), following their forks as
	// FollowForks does. AddDescendants adds those alive at attach.
	WatchChildren bool

	// MinEventNs drops shorter stalls from the stream (they still count in
	// the histograms). Zero entries stream everything.
	MinEventNs [stall.NumCauses]uint64
	// MinStallNs ignores shorter stalls entirely, in the kernel: an
	// uncontended mmap_lock acquisition is not a wait.
	MinStallNs [stall.NumCauses]uint64

	RingBufBytes int // 0 = the default of 8 MiB

	// StacksMinNs: streamed stalls at least this long carry the stalled
	// thread's kernel and user stacks, symbolized as they arrive (Event.Stack).
	// 0 takes no stacks.
	StacksMinNs uint64

	// IncludeSelf traces numatrace's own threads too. They are left out by
	// default as noise, but a check against the kernel's system-wide
	// counters needs them.
	IncludeSelf bool

	Topology *topology.Topology

	// noMigrIter counts migrations on the hook, as where the task iterator
	// cannot load (tests).
	noMigrIter bool
	// noTaskStorage keeps open stalls in the hash, as on kernels without
	// task storage for tracing programs (tests).
	noTaskStorage bool
	// sockreqSyscalls times sockets from the syscalls, as on kernels
	// before 6.3 (tests).
	sockreqSyscalls bool

	// KernelBTF is the path of the kernel's BTF; "" means /sys/kernel/btf/vmlinux.
	KernelBTF string

	// RequestStalls keeps each traced thread's stall totals, which a
	// request timer (AttachLatency) reads as requests start and end.
	RequestStalls bool
	// RequestTimes (with RequestStalls) reads the serving thread's
	// counters at each request's ends, and times its I/O waits in the
	// sched_switch program where that runs: its budget. Off, a request's
	// time past its stalls is not split.
	RequestTimes bool
	// RunqWait attaches the run-queue wait probe: with a latency source,
	// what memory management does not explain is often waiting for a CPU.
	RunqWait bool
	// MmapLockVia chooses how mmap_lock waits are timed: "" picks the
	// lock's slow path where the kernel has it, else the mmap_lock
	// tracepoints.
	MmapLockVia string
	// Skip names probes not to attach (--causes, --no-causes).
	Skip map[ProbeName]bool
	// EveryProbe attaches the probes only a --cgroup target needs too
	// (numatrace probes).
	EveryProbe bool
}

// MmapLockVia values.
const (
	MmapLockAuto        = ""
	MmapLockContention  = "contention"
	MmapLockTracepoints = "tracepoints"
)

// Tracer owns every BPF object numatrace loaded. Close releases them.
type Tracer struct {
	maps    typesMaps            // the maps every object shares (sharedmaps.go)
	shared  map[string]*ebpf.Map // the same, by name, for the loader
	colls   []*ebpf.Collection
	links   []link.Link
	probes  []stall.ProbeStatus
	decoder *Decoder
	cfg     Config
	kspec   *btf.Spec
	// taskStorage: open stalls are in the threads' task storage, not the
	// pendings hash.
	taskStorage bool
	// exitGroupDead: this kernel's sched_process_exit passes group_dead.
	exitGroupDead bool
	reader        *ringbuf.Reader
	stacks        *stackReader   // nil without StacksMinNs
	taskRegs      bool           // the programs read the user stack pointer's word
	bad           atomic.Uint64  // records Stream could not read or decode
	closers       []func() error // extra probes (latency), closed first

	migrIter *link.Iter         // the migrations iterator; nil where it cannot load
	migrBase map[migrKey]uint64 // each thread's se.nr_migrations at attach
	// The sched_switch program's jobs (switchProgram), the
	// memstall wait sites and the tick length, fixed before any load.
	runqOn, memstallOn bool
	siteStart, siteEnd [typesMemstallReasonMEMSTALL_SITES]uint64
	jiffyNs            uint64
	attachedHooks      map[string]bool // object/program@tracepoint: one program serves two probes
}

// ErrNoBTF means the kernel has no BTF, which CO-RE needs.
var ErrNoBTF = errors.New("kernel BTF not found at /sys/kernel/btf/vmlinux (numatrace needs CONFIG_DEBUG_INFO_BTF=y, or --btf FILE)")

// ErrPermission means the process may not load BPF programs.
var ErrPermission = errors.New("permission denied loading BPF: numatrace needs CAP_BPF and CAP_PERFMON (or root)")

func loadKernelBTF(path string) (*btf.Spec, error) {
	if path == "" {
		if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
			return nil, ErrNoBTF
		}
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			return nil, fmt.Errorf("load kernel BTF: %w", err)
		}
		return spec, nil
	}
	// A kernel's BTF is a few MB (vmlinux with its debug info is a few
	// hundred): anything else, such as a device, would be read whole.
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load BTF %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("load BTF %s: not a regular file", path)
	}
	if st.Size() > maxBTFFile {
		return nil, fmt.Errorf("load BTF %s: %d MiB is more than a kernel's BTF or vmlinux holds (at most %d MiB)", path, st.Size()>>20, maxBTFFile>>20)
	}
	spec, err := btf.LoadSpec(path)
	if err != nil {
		return nil, fmt.Errorf("load BTF %s: %w", path, err)
	}
	return spec, nil
}

// maxBTFFile bounds a --btf file: raw BTF, or an ELF vmlinux with it.
const maxBTFFile = 1 << 30

// objectSpecs parses the BPF objects the probes are in.
func objectSpecs() (map[string]*ebpf.CollectionSpec, error) {
	out := map[string]*ebpf.CollectionSpec{}
	for _, def := range probeDefs {
		if out[def.object] != nil {
			continue
		}
		load, ok := objectLoaders[def.object]
		if !ok {
			return nil, fmt.Errorf("probe %s: no BPF object %q (bpf/%s.bpf.c)", def.name, def.object, def.object)
		}
		spec, err := load()
		if err != nil {
			return nil, fmt.Errorf("parse BPF object %s: %w", def.object, err)
		}
		out[def.object] = spec
	}
	return out, nil
}

// Open loads the maps, then loads and attaches every probe independently.
// A probe that fails is recorded in Probes() and does not stop the others.
// Open fails only if nothing useful can run: no BTF, no permission, or no
// probe attached.
func Open(cfg Config) (*Tracer, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	kspec, err := loadKernelBTF(cfg.KernelBTF)
	if err != nil {
		return nil, err
	}
	// Kernels since 5.11 charge BPF memory to the cgroup; this only matters
	// on older ones, and an error here is not fatal on newer ones.
	_ = rlimit.RemoveMemlock()

	t := &Tracer{decoder: NewDecoder(kspec), cfg: cfg, kspec: kspec}
	if err := t.load(cfg, kspec); err != nil {
		t.Close()
		return nil, err
	}
	// The reader exists before anyone streams, so Stop can always flush it.
	rd, err := ringbuf.NewReader(t.maps.Events)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	t.reader = rd
	return t, nil
}

// load creates the maps and loads every probe; Open closes what it made
// if it fails.
func (t *Tracer) load(cfg Config, kspec *btf.Spec) error {
	if err := t.createMaps(cfg); err != nil {
		return err
	}
	specs, err := objectSpecs()
	if err != nil {
		return err
	}
	t.exitGroupDead = exitPassesGroupDead(kspec)
	t.switchJobs(cfg, kspec)
	for o, spec := range specs {
		if err := t.configure(spec); err != nil {
			return fmt.Errorf("configure object %s: %w", o, err)
		}
	}
	// Migration totals from the task iterator where it loads; the hook
	// then only counts cross-node moves (see migrations.go).
	if !cfg.noMigrIter && !cfg.Skip[probeTaskMigration] && t.openMigrationsIter(specs[migrationsObject], kspec) == nil {
		if err := specs[migrationsObject].Variables[typesVarCfgMigrIter].Set(uint32(1)); err != nil {
			return err
		}
	}
	attached := 0
	for _, def := range probeDefs {
		if (def.cgroupOnly && cfg.CgroupID == 0 && !cfg.EveryProbe) || (def.forksOnly && !cfg.FollowForks && !t.watching()) ||
			(def.latencyOnly && !cfg.RunqWait) {
			continue
		}
		if cfg.Skip[def.name] {
			st := def.status()
			st.Skipped, st.Error = true, "left out (--causes / --no-causes)"
			t.probes = append(t.probes, st)
			continue
		}
		if def.name == probeTaskMigration && t.migrIter == nil {
			def.hooks = []hook{{"sched_migrate_task", one(progMigrateCount, 2, map[int]string{0: "p", 1: "dest_cpu"})}}
		}
		st := t.openWithFallback(def, cfg, specs, kspec)
		if st.Attached && !infrastructure[def.name] { // thread_exit alone traces nothing
			attached++
		}
		t.probes = append(t.probes, st)
	}
	if t.migrIter != nil {
		if err := t.takeMigrationBase(); err != nil {
			return err
		}
	}
	if attached == 0 {
		first := "no probes"
		for _, p := range t.probes {
			if !p.Attached && !p.Skipped {
				first = p.Name + ": " + p.Error
				break
			}
		}
		if cfg.Skip != nil {
			return fmt.Errorf("none of the probes asked for attached (%s; runq_wait also needs a latency source and a target)", first)
		}
		return fmt.Errorf("no probe could attach (%s)", first)
	}
	return nil
}

// sharedMap is shared map name's spec as this tracer makes it: createMaps
// creates it so, and configure reshapes every object's copy the same way,
// as a replacement must match its spec.
func (t *Tracer) sharedMap(name string, ms *ebpf.MapSpec) *ebpf.MapSpec {
	ms = ms.Copy()
	switch {
	case name == typesMapTaskPendings && !t.taskStorage:
		// A one-entry hash the verifier never sees used: cfg_task_storage
		// = 0 leaves every use of it dead code.
		ms.Type, ms.Flags, ms.MaxEntries = ebpf.Hash, 0, 1
	case name == typesMapPendings && t.taskStorage:
		ms.MaxEntries = 1 // never used: open stalls are in task storage
	case name == typesMapRunqDelay && t.taskStorage:
		ms.MaxEntries = 1 // never used: run_delay is kept in task storage
	case name == typesMapEvents && t.cfg.RingBufBytes > 0:
		ms.MaxEntries = uint32(t.cfg.RingBufBytes)
	case name == typesMapThreadStalls && !t.cfg.RequestStalls:
		ms.MaxEntries = 1 // never written: no request timer reads it
	case name == typesMapWatchedTgids && !t.watching():
		ms.MaxEntries = 1 // never used: no descendants are watched
	}
	return ms
}

// configure readies an object for the maps createMaps made, and sets the
// load-time constants the verifier will see.
func (t *Tracer) configure(spec *ebpf.CollectionSpec) error {
	for _, name := range sharedMapNames {
		if ms, ok := spec.Maps[name]; ok {
			spec.Maps[name] = t.sharedMap(name, ms)
		}
	}
	cfg := t.cfg
	mode := typesFilterModeFILTER_NONE
	switch cfg.Filter {
	case FilterPIDs:
		mode = typesFilterModeFILTER_TGIDS
	case FilterTID:
		mode = typesFilterModeFILTER_TID
	}
	set := map[string]any{
		typesVarCfgTaskStorage:       boolU32(t.taskStorage),
		typesVarCfgRequestStalls:     boolU32(cfg.RequestStalls),
		typesVarCfgRequestTimes:      boolU32(cfg.RequestStalls && cfg.RequestTimes),
		typesVarCfgIoWait:            boolU32(t.IOWaitTimed()),
		typesVarCfgWaitStacks:        boolU32(t.WaitStacksTaken()),
		typesVarCfgNotMemory:         notMemoryMask(),
		typesVarCfgMultiNode:         boolU32(cfg.Topology != nil && len(cfg.Topology.Nodes) > 1),
		typesVarCfgTargetCgroup:      cfg.CgroupID,
		typesVarCfgWatchChildren:     boolU32(t.watching()),
		typesVarCfgWakeupBytes:       uint64(spec.Maps[typesMapEvents].MaxEntries / 8),
		typesVarCfgFilterMode:        uint32(mode),
		typesVarCfgFilterTid:         cfg.TID,
		typesVarCfgFilterTgid:        singleTgid(cfg),
		typesVarCfgSelfTgid:          selfTgid(cfg),
		typesVarCfgMinEventNs:        cfg.MinEventNs,
		typesVarCfgMinStallNs:        cfg.MinStallNs,
		typesVarCfgExitGroupDead:     boolU32(t.exitGroupDead),
		typesVarCfgStacksMinNs:       cfg.StacksMinNs,
		typesVarCfgTaskRegs:          boolU32(t.taskRegs),
		typesVarCfgMemstall:          boolU32(t.memstallOn),
		typesVarCfgMemstallSiteStart: t.siteStart,
		typesVarCfgMemstallSiteEnd:   t.siteEnd,
		typesVarCfgNsPerJiffy:        t.jiffyNs,
	}
	if ms, ok := spec.Maps[schedMapWaitStacks]; ok && !t.taskStorage {
		// As task_pendings without task storage: never used.
		ms.Type, ms.Flags, ms.MaxEntries = ebpf.Hash, 0, 1
	}
	for name, v := range set {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("variable %s missing", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

// notMemoryMask is cfg_not_memory: the causes the cause table marks as
// not memory management's, which a thread's freeze total leaves out.
func notMemoryMask() uint32 {
	var m uint32
	for _, c := range stall.AllCauses() {
		if c.Desc().NotMemory {
			m |= 1 << c
		}
	}
	return m
}

// The mask has a bit per cause.
var _ [32 - int(stall.NumCauses)]struct{}

// exitPassesGroupDead says whether this kernel's sched_process_exit
// passes group_dead (6.16+), which thread_exit then reads.
func exitPassesGroupDead(kspec *btf.Spec) bool {
	if kspec == nil {
		return false
	}
	sig, err := tracepointSignature(kspec, "sched_process_exit")
	if err != nil || len(sig.types) < 2 {
		return false
	}
	return len(sig.names) < 2 || sig.names[1] == "group_dead"
}

func (t *Tracer) createMaps(cfg Config) error {
	spec, err := loadTypes()
	if err != nil {
		return fmt.Errorf("parse BPF object: %w", err)
	}
	if err := checkCauses(spec.Types); err != nil {
		return err
	}
	t.taskStorage = !cfg.noTaskStorage && haveTaskStorage() == nil
	t.taskRegs = cfg.StacksMinNs > 0 && t.taskStorage && haveTaskRegs()
	if err := t.createSharedMaps(spec); err != nil {
		return err
	}
	if cfg.StacksMinNs > 0 {
		t.stacks = newStackReader()
	}
	if err := t.fillCPUNodes(cfg.Topology); err != nil {
		return err
	}
	return t.AddPIDs(cfg.PIDs)
}

func (t *Tracer) fillCPUNodes(topo *topology.Topology) error {
	if topo == nil {
		return nil
	}
	m := t.maps.CpuNode
	for cpu, node := range topo.CPUNode {
		if cpu >= int(m.MaxEntries()) {
			continue
		}
		if err := m.Put(uint32(cpu), int32(node)); err != nil {
			return fmt.Errorf("fill cpu_node: %w", err)
		}
	}
	return nil
}

// singleTgid is the one process of a target set that never grows (--pid),
// which the programs then compare with directly; 0 otherwise.
func singleTgid(cfg Config) uint32 {
	if cfg.Filter == FilterPIDs && len(cfg.PIDs) == 1 && !cfg.FollowForks {
		return cfg.PIDs[0]
	}
	return 0
}

// watching says whether the target's descendants are watched: only
// where the target is one process (Config.WatchChildren).
func (t *Tracer) watching() bool { return t.cfg.WatchChildren && singleTgid(t.cfg) != 0 }

// treeSet is the set the kernel follows forks from: the traced set with
// FollowForks, the watched one with WatchChildren.
func (t *Tracer) treeSet() (*ebpf.Map, uint8, error) {
	switch {
	case t.cfg.FollowForks:
		return t.maps.TargetTgids, 1, nil
	case t.watching():
		return t.maps.WatchedTgids, 0, nil
	}
	return nil, 0, errors.New("the tracer follows no forks")
}

// AddDescendants adds descendants of the target, found alive in /proc, to
// the set the kernel follows forks from, and returns those it did not
// hold yet: the kernel adds the children a member forks itself.
func (t *Tracer) AddDescendants(pids []uint32) ([]uint32, error) {
	m, v, err := t.treeSet()
	if err != nil {
		return nil, fmt.Errorf("add descendants: %w", err)
	}
	var added []uint32
	for _, pid := range pids {
		err := m.Update(pid, v, ebpf.UpdateNoExist)
		switch {
		case err == nil:
			added = append(added, pid)
		case errors.Is(err, ebpf.ErrKeyExist):
		default:
			return added, fmt.Errorf("add descendant pid %d: %w", pid, err)
		}
	}
	return added, nil
}

// DropDescendants takes processes out of that set again: those that
// exited before they were added, whose exit could not take them out.
func (t *Tracer) DropDescendants(pids []uint32) error {
	m, _, err := t.treeSet()
	if err != nil {
		return fmt.Errorf("drop descendants: %w", err)
	}
	for _, pid := range pids {
		if err := m.Delete(pid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("drop descendant pid %d: %w", pid, err)
		}
	}
	return nil
}

// TargetPIDs lists the kernel-side target set (FilterPIDs): the
// processes given, and those the kernel followed since.
func (t *Tracer) TargetPIDs() ([]uint32, error) {
	var (
		out []uint32
		pid uint32
		v   uint8
	)
	it := t.maps.TargetTgids.Iterate()
	for it.Next(&pid, &v) {
		out = append(out, pid)
	}
	return out, iterErr(it, typesMapTargetTgids)
}

// AddPIDs adds processes to the kernel-side target set (FilterPIDs).
func (t *Tracer) AddPIDs(pids []uint32) error {
	m := t.maps.TargetTgids
	for _, pid := range pids {
		if one := singleTgid(t.cfg); one != 0 && pid != one {
			return fmt.Errorf("add target pid %d: the target is process %d alone (its filter has no set to grow)", pid, one)
		}
		if err := m.Put(pid, uint8(1)); err != nil {
			return fmt.Errorf("add target pid %d: %w", pid, err)
		}
	}
	return nil
}

func wrapLoadErr(err error) error {
	if !errors.Is(err, os.ErrPermission) {
		return err
	}
	// Refused with the capabilities held: a container's seccomp filter,
	// whose runtime default allows bpf() only with CAP_SYS_ADMIN.
	if CheckPrivileges() == nil && seccompFiltered("/proc/self/status") {
		return fmt.Errorf("%w: %v: the capabilities are held, but a seccomp filter is on and may refuse bpf(): its profile must allow bpf() and perf_event_open() (deploy/kubernetes/seccomp/numatrace.json, docs/FLEET.md)", ErrPermission, err)
	}
	return fmt.Errorf("%w: %v", ErrPermission, err)
}

// seccompFiltered says whether the status file reports a seccomp filter.
func seccompFiltered(status string) bool {
	b, err := os.ReadFile(status)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(v) == "2"
		}
	}
	return false
}

// openProbe loads one probe's programs against the shared maps and
// attaches them; on any failure everything it opened is closed again.
// openWithFallback opens a probe, or its fallback where the kernel lacks
// the probe's hooks; Config.MmapLockVia can insist on either.
func (t *Tracer) openWithFallback(def probeDef, cfg Config, specs map[string]*ebpf.CollectionSpec, kspec *btf.Spec) stall.ProbeStatus {
	if def.fallback == nil {
		return t.openProbe(def, specs[def.object], kspec)
	}
	switch cfg.MmapLockVia {
	case MmapLockTracepoints:
		return t.openProbe(*def.fallback, specs[def.fallback.object], kspec)
	case MmapLockContention:
		return t.openProbe(def, specs[def.object], kspec)
	}
	st := t.openProbe(def, specs[def.object], kspec)
	if st.Attached {
		return st
	}
	fb := t.openProbe(*def.fallback, specs[def.fallback.object], kspec)
	if !fb.Attached {
		fb.Error = st.Error + "; and " + fb.Error
	} else {
		fb.Description += " (the slow path: " + st.Error + ")"
	}
	return fb
}

func (t *Tracer) openProbe(def probeDef, spec *ebpf.CollectionSpec, kspec *btf.Spec) stall.ProbeStatus {
	st := def.status()
	for _, h := range def.hooks {
		st.Tracepoints = append(st.Tracepoints, h.tracepoint)
	}
	fail := func(err error) stall.ProbeStatus {
		st.Error = err.Error()
		st.Programs = nil
		return st
	}
	if def.requires != nil {
		if err := def.requires(kspec); err != nil {
			return fail(err)
		}
	}
	if def.taskStorage && !t.taskStorage {
		return fail(errors.New("needs task storage for tracing programs (5.12+)"))
	}
	for _, h := range def.hooks {
		sig, err := tracepointSignature(kspec, h.tracepoint)
		if err != nil {
			return fail(err)
		}
		prog, err := h.pick(sig)
		if err != nil {
			return fail(err)
		}
		if prog == schedProgOnSwitch {
			prog = t.switchProgram()
		}
		st.Programs = append(st.Programs, prog)
	}
	// A hook another probe attached already serves this one too.
	var hooks []hook
	var progs []string
	for i, h := range def.hooks {
		if !t.attachedHooks[hookKey(def.object, st.Programs[i], h.tracepoint)] {
			hooks, progs = append(hooks, h), append(progs, st.Programs[i])
		}
	}
	if len(hooks) == 0 {
		st.Attached = true
		return st
	}
	coll, err := t.loadPrograms(spec, kspec, progs...)
	if err != nil {
		return fail(wrapLoadErr(fmt.Errorf("load: %w", err)))
	}
	var links []link.Link
	for i, h := range hooks {
		l, err := attach(coll.Programs[progs[i]], h.tracepoint)
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			coll.Close()
			return fail(wrapLoadErr(fmt.Errorf("attach %s: %w", h.tracepoint, err)))
		}
		links = append(links, l)
	}
	if t.attachedHooks == nil {
		t.attachedHooks = map[string]bool{}
	}
	for i, h := range hooks {
		t.attachedHooks[hookKey(def.object, progs[i], h.tracepoint)] = true
	}
	t.colls = append(t.colls, coll)
	t.links = append(t.links, links...)
	st.Attached = true
	return st
}

func hookKey(object, program, tracepoint string) string {
	return object + "/" + program + "@" + tracepoint
}

// switchJobs decides what the sched_switch program does, before any
// object is configured: run-queue wait with a latency source, memstall
// waits where the kernel marks memory stalls; and reads the wait sites
// and the tick length the memstall and dirty-throttle programs need.
func (t *Tracer) switchJobs(cfg Config, kspec *btf.Spec) {
	t.runqOn = cfg.RunqWait && !cfg.Skip[probeRunqWait] && schedInfoOn(kspec) == nil
	t.memstallOn = !cfg.Skip[probeMemstallWait] && t.taskStorage && memstallReady(kspec) == nil
	if t.memstallOn {
		// Without the sites every wait still counts, as "other".
		t.siteStart, t.siteEnd, _ = memstallSites("/proc/kallsyms")
	}
	if !cfg.Skip[probeDirtyThrottle] {
		t.jiffyNs, _ = nsPerJiffy() // 0: the probe reports why it cannot attach
	}
}

// IOWaitTimed says whether the sched_switch program times the traced
// threads' I/O waits, which the requests' budgets read as their disk I/O
// wait: with the run-queue job, for requests timed in the kernel, where
// task storage keeps each thread's wait open. Elsewhere the budgets read
// delay accounting's, which the kernel keeps only with
// kernel.task_delayacct on, and keeps wrong from 6.12 on (common.h:
// task_io_ns).
func (t *Tracer) IOWaitTimed() bool {
	return t.runqOn && t.taskStorage && t.cfg.RequestStalls && t.cfg.RequestTimes
}

// WaitStacksTaken reports whether the serving threads' long sleeps inside
// requests go out as waits (stall.KindWait), with stacks where they can:
// where their I/O waits are timed, with stacks on.
func (t *Tracer) WaitStacksTaken() bool { return t.IOWaitTimed() && t.cfg.StacksMinNs > 0 }

// switchProgram is the sched_switch program built for the jobs on: both
// probes that need it name the same one, which attaches once.
func (t *Tracer) switchProgram() string {
	switch {
	case t.runqOn && !t.memstallOn:
		return schedProgOnSwitchRq
	case t.memstallOn && !t.runqOn:
		return schedProgOnSwitchMs
	}
	return schedProgOnSwitch
}

// loadPrograms loads only the named programs of an object, against the
// shared maps. The loader copies what it loads, so the spec is shared as is.
func (t *Tracer) loadPrograms(spec *ebpf.CollectionSpec, kspec *btf.Spec, names ...string) (*ebpf.Collection, error) {
	sub := &ebpf.CollectionSpec{Maps: spec.Maps, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder,
		Programs: map[string]*ebpf.ProgramSpec{}}
	for _, name := range names {
		ps, ok := spec.Programs[name]
		if !ok {
			return nil, fmt.Errorf("program %s missing from BPF object", name)
		}
		sub.Programs[name] = ps
	}
	return ebpf.NewCollectionWithOptions(sub, ebpf.CollectionOptions{
		MapReplacements: t.shared,
		Programs:        ebpf.ProgramOptions{KernelTypes: kspec},
	})
}

func attach(p *ebpf.Program, tracepoint string) (link.Link, error) {
	if p.Type() == ebpf.Tracing {
		return link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
	}
	return link.AttachRawTracepoint(link.RawTracepointOptions{Name: tracepoint, Program: p})
}

// Probes reports every probe and whether it attached, sorted as defined.
func (t *Tracer) Probes() []stall.ProbeStatus { return append([]stall.ProbeStatus(nil), t.probes...) }

// Features probes the optional kernel features. Only `numatrace probes`
// asks, so attaching does not pay for the test programs.
func (t *Tracer) Features() []Feature {
	return append(probeFeatures(t.kspec), t.taskStorageFeature(), t.stackRegsFeature())
}

// Decoder returns the decoder for this kernel's records.
func (t *Tracer) Decoder() *Decoder { return t.decoder }

// Reader returns the reader of the event ring buffer. The tracer owns it:
// Close closes it.
func (t *Tracer) Reader() (*ringbuf.Reader, error) {
	if t.reader == nil {
		return nil, errors.New("the tracer is closed")
	}
	return t.reader, nil
}

// Detach stops every probe; the maps stay readable for a final snapshot.
func (t *Tracer) Detach() error {
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	return errors.Join(errs...)
}

// Close closes the reader, then detaches every probe, then frees the
// programs and maps.
func (t *Tracer) Close() error {
	var errs []error
	for _, c := range t.closers {
		errs = append(errs, c())
	}
	t.closers = nil
	if t.reader != nil {
		errs = append(errs, t.reader.Close())
		t.reader = nil
	}
	errs = append(errs, t.Detach())
	if t.stacks != nil {
		t.stacks.close()
	}
	if t.migrIter != nil {
		errs = append(errs, t.migrIter.Close())
		t.migrIter = nil
	}
	for _, c := range t.colls {
		c.Close()
	}
	t.colls = nil
	errs = append(errs, t.maps.Close())
	t.maps, t.shared = typesMaps{}, nil
	return errors.Join(errs...)
}

// selfTgid is the process the kernel side leaves out: numatrace, unless
// asked to include itself (no process has tgid 2^32-1).
func selfTgid(cfg Config) uint32 {
	if cfg.IncludeSelf {
		return ^uint32(0)
	}
	return uint32(os.Getpid())
}
