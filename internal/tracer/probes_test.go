//go:build linux

package tracer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
)

func sig(names ...string) *signature {
	s := &signature{names: names}
	for range names {
		s.types = append(s.types, &btf.Int{Name: "int", Size: 4})
	}
	return s
}

func unnamed(n int) *signature {
	s := &signature{}
	for i := 0; i < n; i++ {
		s.types = append(s.types, &btf.Int{Name: "int", Size: 4})
	}
	return s
}

func hookFor(t *testing.T, tracepoint string) hook {
	t.Helper()
	for _, top := range probeDefs {
		for d := &top; d != nil; d = d.fallback {
			for _, h := range d.hooks {
				if h.tracepoint == tracepoint {
					return h
				}
			}
		}
	}
	t.Fatalf("no hook for %s", tracepoint)
	return hook{}
}

// The variants must follow the kernel's signature, not the newest kernel's:
// a 7-argument program on an 8-argument tracepoint loads and reads garbage.
func TestPickFollowsKernelSignature(t *testing.T) {
	cases := []struct {
		tracepoint string
		sig        *signature
		want       string
	}{
		{"mm_migrate_pages", sig("succeeded", "failed", "thp_succeeded", "thp_failed", "thp_split", "large_folio_split", "mode", "reason"), "migrate_end_r7"},
		{"mm_migrate_pages", sig("succeeded", "failed", "thp_succeeded", "thp_failed", "thp_split", "mode", "reason"), "migrate_end_r6"},
		{"mm_migrate_pages", unnamed(7), "migrate_end_r6"},
		{"mm_compaction_end", sig("cc", "zone_start", "zone_end", "sync", "status"), "compact_pass_end_cc"},
		{"mm_compaction_end", sig("zone_start", "migrate_pfn", "free_pfn", "zone_end", "sync", "status"), "compact_pass_end_pfn"},
		{"mmap_lock_acquire_returned", sig("mm", "write", "success"), "mmap_lock_acquired_w1"},
		{"mmap_lock_acquire_returned", sig("mm", "memcg_path", "write", "success"), "mmap_lock_acquired_w2"},
		{"mm_vmscan_direct_reclaim_begin", unnamed(2), "direct_reclaim_begin"},
		{"mmap_lock_start_locking", sig("mm", "memcg_path", "write"), "mmap_lock_start"},
		{"contention_begin", unnamed(2), "mmap_contended"},
		{"contention_end", sig("lock", "ret"), "mmap_contention_end"},
	}
	for _, c := range cases {
		got, err := hookFor(t, c.tracepoint).pick(c.sig)
		if err != nil || got != c.want {
			t.Errorf("%s%s: got %q, %v; want %s", c.tracepoint, c.sig, got, err, c.want)
		}
	}
}

func TestPickRejectsUnknownSignatures(t *testing.T) {
	cases := []struct {
		tracepoint string
		sig        *signature
	}{
		// 5.4's four-argument mm_migrate_pages: no variant reads it right.
		{"mm_migrate_pages", sig("succeeded", "failed", "mode", "reason")},
		// Right count, wrong names: the arguments moved.
		{"mm_migrate_pages", sig("succeeded", "failed", "thp_succeeded", "thp_failed", "thp_split", "reason", "mode")},
		{"mm_vmscan_direct_reclaim_end", unnamed(2)},
		{"mm_vmscan_node_reclaim_begin", sig("order", "nid", "gfp_flags")},
	}
	for _, c := range cases {
		got, err := hookFor(t, c.tracepoint).pick(c.sig)
		if err == nil {
			t.Errorf("%s%s picked %s", c.tracepoint, c.sig, got)
			continue
		}
		if !strings.Contains(err.Error(), c.tracepoint) {
			t.Errorf("error %q does not name the tracepoint", err)
		}
	}
}

// Every probe's programs exist in the compiled objects, and every program
// in every object (a new BPF file's too, which no probe may name yet) is
// used by some probe: a renamed C function cannot slip by, nor a cause's
// programs that no probe attaches.
func TestProbeDefsMatchObjects(t *testing.T) {
	specs := map[string]*ebpf.CollectionSpec{}
	for name, load := range objectLoaders {
		spec, err := load()
		if err != nil {
			t.Fatalf("parse BPF object %s: %v", name, err)
		}
		specs[name] = spec
	}
	// Programs outside probeDefs: the migrations iterator and the request
	// timer's uprobes (uprobe.go) and socket hooks (sockreq.go).
	used := map[string]bool{progMigrationsIter: true, progMigrateCount: true,
		latencyProgRequestEnter: true, latencyProgRequestExit: true,
		latencyProgRequestEnterGo: true, latencyProgRequestExitGo: true}
	for _, h := range append(SockreqViaSock, SockreqViaSyscalls...) {
		used[h.Program] = true
	}
	for _, jobs := range [][2]bool{{true, true}, {true, false}, {false, true}} {
		used[(&Tracer{runqOn: jobs[0], memstallOn: jobs[1]}).switchProgram()] = true
	}
	for _, top := range probeDefs {
		for d := &top; d != nil; d = d.fallback {
			for _, h := range d.hooks {
				for _, v := range h.variants {
					if spec, ok := specs[d.object]; !ok || spec.Programs[v.program] == nil {
						t.Errorf("probe %s: program %s not in its object", d.name, v.program)
					}
					used[v.program] = true
				}
			}
		}
	}
	for _, spec := range specs {
		for name := range spec.Programs {
			if !used[name] {
				t.Errorf("program %s is compiled but no probe uses it", name)
			}
		}
	}
}

func TestSignatureFromThisKernel(t *testing.T) {
	spec, err := loadKernelBTF("")
	testutil.RequireFeature(t, err == nil, fmt.Sprint("kernel BTF: ", err))
	s, err := tracepointSignature(spec, "mm_vmscan_node_reclaim_begin")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.types) != 3 || (s.named() && s.names[0] != "nid") {
		t.Fatalf("node_reclaim_begin signature %s", s)
	}
	if _, err := tracepointSignature(spec, "no_such_tracepoint"); err == nil {
		t.Fatal("a missing tracepoint was found")
	}
}

// Every cause is fed by a probe that says so: a cause no probe names is
// untraced in every run's probe list, and no verdict would weigh it.
func TestEveryCauseHasAProbe(t *testing.T) {
	var fed [stall.NumCauses]bool
	for _, top := range probeDefs {
		for d := &top; d != nil; d = d.fallback {
			if d.cause != nil {
				fed[*d.cause] = true
			}
		}
	}
	for _, c := range stall.AllCauses() {
		if !fed[c] {
			t.Errorf("no probe feeds %s: give its probe in probeDefs cause: feeds(...)", c)
		}
	}
}

// --causes names probes or causes; the probes that keep the others
// working are never skipped, and a name that is neither is an error.
func TestSkipProbes(t *testing.T) {
	skip, err := SkipProbes("memcg_reclaim", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range probeDefs {
		want := !infrastructure[d.name] && (d.cause == nil || *d.cause != stall.MemcgReclaim)
		if skip[d.name] != want {
			t.Errorf("--causes memcg_reclaim: %s skipped %v, want %v", d.name, skip[d.name], want)
		}
	}
	if skip, _ = SkipProbes("", "mmap_lock,kswapd_wakeup"); len(skip) != 2 || !skip["mmap_lock"] || !skip["kswapd_wakeup"] {
		t.Errorf("--no-causes mmap_lock,kswapd_wakeup: %v", skip)
	}
	if _, err := SkipProbes("thread_exit", ""); err == nil {
		t.Error("thread_exit could be asked for by name")
	}
}

// The sched_switch program is the one built for the jobs on, so that no
// switch reads which jobs are on (bench: 25-40 ns a load of a global).
func TestSwitchProgramFollowsJobs(t *testing.T) {
	for _, c := range []struct {
		runq, memstall bool
		want           string
	}{
		{true, true, schedProgOnSwitch},
		{false, true, schedProgOnSwitchMs},
		{true, false, schedProgOnSwitchRq},
	} {
		if got := (&Tracer{runqOn: c.runq, memstallOn: c.memstall}).switchProgram(); got != c.want {
			t.Errorf("runq %v, memstall %v: %s, want %s", c.runq, c.memstall, got, c.want)
		}
	}
}
