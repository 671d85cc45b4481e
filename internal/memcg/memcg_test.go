package memcg

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/hostfs"
)

// tree writes files (path → content) under a new root and opens it.
func tree(t *testing.T, files map[string]string) *hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

// hybrid is this machine kind's layout: v1 controllers, one of them
// memory, beside a cgroup2 hierarchy without it.
const hybridMounts = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const v1Root = "sys/fs/cgroup/memory/"

// v1Group is a v1 memory group at its 160 MiB limit, mostly page cache.
func v1Group(dir string) map[string]string {
	return map[string]string{
		dir + "/memory.limit_in_bytes":     "167772160\n",
		dir + "/memory.usage_in_bytes":     "166723584\n",
		dir + "/memory.max_usage_in_bytes": "167772160\n",
		dir + "/memory.failcnt":            "1234\n",
		dir + "/memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
		// The plain keys are the group's own pages; the totals, its
		// subtree's, are what usage counts.
		dir + "/memory.stat": "cache 0\nrss 0\nhierarchical_memory_limit 167772160\ntotal_cache 120586240\ntotal_rss 41943040\n",
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// On cgroup v1 the memory controller's line of /proc/PID/cgroup names the
// group, found under the controller's mount; the figures are the
// subtree's (total_cache, not cache).
func TestV1GroupOfAProcess(t *testing.T) {
	fs := tree(t, merge(v1Group(v1Root+"numatrace-e2e-redis"), map[string]string{
		"proc/self/mountinfo":                hybridMounts,
		"proc/4242/cgroup":                   "9:pids:/\n4:memory:/numatrace-e2e-redis\n0::/\n",
		v1Root + "memory.limit_in_bytes":     "9223372036854771712\n",
		v1Root + "memory.usage_in_bytes":     "2365030400\n",
		"sys/fs/cgroup/unified/cgroup.procs": "",
	}))
	r, err := Of(fs, 4242)
	if err != nil {
		t.Fatal(err)
	}
	want := Reading{Group: "memory/numatrace-e2e-redis", Limit: 160 << 20, High: Unlimited, Usage: 166723584, Peak: 160 << 20,
		File: 115 << 20, Anon: 40 << 20, Failcnt: 1234}
	if *r != want {
		t.Fatalf("reading %+v\nwant    %+v", *r, want)
	}
	s := Span{End: r}
	if got, want := s.Sentence(), "the cgroup memory/numatrace-e2e-redis reached its limit (160 MiB; usage 159 MiB, 72% of it page cache, failcnt 1,234)"; got != want {
		t.Errorf("sentence %q\nwant     %q", got, want)
	}
	if r.Knob() != "memory.limit_in_bytes" {
		t.Errorf("knob %q", r.Knob())
	}
}

// cgroup v2: memory.max and memory.high, memory.events, file and anon;
// the group reached memory.high, the tighter, and was throttled there.
func TestV2GroupOfAProcess(t *testing.T) {
	dir := "sys/fs/cgroup/system.slice/redis.service"
	fs := tree(t, map[string]string{
		"proc/4242/cgroup":      "0::/system.slice/redis.service\n",
		dir + "/memory.max":     "268435456\n",
		dir + "/memory.high":    "134217728\n",
		dir + "/memory.current": "134000640\n",
		dir + "/memory.stat":    "anon 33554432\nfile 100663296\nkernel 1048576\n",
		dir + "/memory.events":  "low 0\nhigh 340\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
		// The slice above it is unlimited; the root has no memory.max.
		"sys/fs/cgroup/system.slice/memory.max":     "max\n",
		"sys/fs/cgroup/system.slice/memory.high":    "max\n",
		"sys/fs/cgroup/system.slice/memory.current": "200000000\n",
		"sys/fs/cgroup/memory.stat":                 "anon 1\n",
	})
	r, err := Of(fs, 4242) // no mountinfo in this copy: the conventional layout
	if err != nil {
		t.Fatal(err)
	}
	want := Reading{Group: "system.slice/redis.service", V2: true, Limit: 256 << 20, High: 128 << 20, Usage: 134000640,
		File: 96 << 20, Anon: 32 << 20, Events: Events{High: 340}}
	if *r != want {
		t.Fatalf("reading %+v\nwant    %+v", *r, want)
	}
	if got, want := (Span{End: r}).Sentence(), "the cgroup system.slice/redis.service reached its memory.high (128 MiB; usage 128 MiB, 75% of it page cache, memory.events high 340)"; got != want {
		t.Errorf("sentence %q\nwant     %q", got, want)
	}
	if r.Knob() != "memory.high" {
		t.Errorf("knob %q", r.Knob())
	}
}

// A pod's limit is on its pod group: the container's own group is
// unlimited (or looser), so the group reclaimed, and named, is the pod's,
// around the target's.
func TestAnAncestorsLimitBinds(t *testing.T) {
	pod := "sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice"
	ctr := pod + "/cri-containerd-8d2f.scope"
	fs := tree(t, map[string]string{
		"proc/self/mountinfo":                         "41 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
		"proc/7/cgroup":                               "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-8d2f.scope\n",
		ctr + "/memory.max":                           "max\n",
		ctr + "/memory.current":                       "60000000\n",
		pod + "/memory.max":                           "67108864\n",
		pod + "/memory.current":                       "67000000\n",
		pod + "/memory.events":                        "max 17\n",
		"sys/fs/cgroup/kubepods.slice/memory.max":     "1073741824\n",
		"sys/fs/cgroup/kubepods.slice/memory.current": "1\n",
	})
	r, err := Of(fs, 7)
	if err != nil {
		t.Fatal(err)
	}
	if r.Group != "kubepods.slice/kubepods-pod1.slice" || r.Member != "kubepods.slice/kubepods-pod1.slice/cri-containerd-8d2f.scope" || r.Limit != 64<<20 {
		t.Fatalf("reading %+v: want the pod's group, around the container's", *r)
	}
	if s := (Span{End: r}).Sentence(); !strings.HasPrefix(s, "the cgroup kubepods.slice/kubepods-pod1.slice, around the target's kubepods.slice/kubepods-pod1.slice/cri-containerd-8d2f.scope, reached its memory.max (64 MiB;") {
		t.Errorf("sentence %q", s)
	}
}

// Two readings of one group: each counter says how much it grew between
// them; a group with no limit says so, and names no limit.
func TestSpanFigures(t *testing.T) {
	start := &Reading{Group: "memory/a", Limit: 64 << 20, High: Unlimited, Usage: 1 << 20, Failcnt: 34}
	end := &Reading{Group: "memory/a", Limit: 64 << 20, High: Unlimited, Usage: 64 << 20, File: 60 << 20, Failcnt: 1234}
	s := Span{Start: start, End: end}
	if got, want := s.Sentence(), "the cgroup memory/a reached its limit (64 MiB; usage 64 MiB, 94% of it page cache, failcnt 1,234 (+1,200 over the run))"; got != want {
		t.Errorf("sentence %q\nwant     %q", got, want)
	}
	// Another group at the end: no growth across two groups.
	other := *end
	other.Group = "memory/b"
	if f := (Span{Start: start, End: &other}).Figures(); strings.Contains(f, "over the run") {
		t.Errorf("growth across two groups: %q", f)
	}
	free := Span{End: &Reading{Group: "memory/c", Limit: Unlimited, High: Unlimited, Usage: 3 << 30, File: 3 << 29}}
	if got, want := free.Sentence(), "the cgroup memory/c has no memory limit (usage 3.0 GiB, 50% of it page cache, failcnt 0)"; got != want {
		t.Errorf("sentence %q\nwant     %q", got, want)
	}
	if free.AtLimit() {
		t.Error("a group with no limit is at its limit")
	}
	roomy := Span{End: &Reading{Group: "memory/d", Limit: 1 << 30, High: Unlimited, Usage: 100 << 20}}
	if roomy.AtLimit() || !strings.Contains(roomy.Sentence(), "stayed under its limit (1.0 GiB;") {
		t.Errorf("a roomy group: %q", roomy.Sentence())
	}
}

// A process in no group with memory files says why; --cgroup's directory
// is read as the group it names, v1 or v2.
func TestNoGroupAndDir(t *testing.T) {
	fs := tree(t, merge(v1Group(v1Root+"cg"), map[string]string{
		"proc/self/mountinfo":                  hybridMounts,
		"proc/1/cgroup":                        "4:memory:/\n0::/\n",
		"proc/2/cgroup":                        "0::/\n",
		"sys/fs/cgroup/unified/x/cgroup.procs": "",
	}))
	for _, pid := range []int{2} {
		_, err := Of(fs, pid)
		var none *NoGroupError
		if !errors.As(err, &none) {
			t.Errorf("pid %d: err %v, want a NoGroupError", pid, err)
		}
	}
	r, err := Dir(fs, "/sys/fs/cgroup/memory/cg")
	if err != nil || r.Group != "memory/cg" || r.Failcnt != 1234 {
		t.Errorf("Dir: %+v, %v", r, err)
	}
	if _, err := Dir(fs, "/sys/fs/cgroup/unified/x"); err == nil {
		t.Error("a cgroup2 group without the memory controller has a reading")
	}
}

// What the kernel and other users write is untrusted: a group named with
// a terminal escape is escaped, and a file that is not a number is an
// error naming the file, not a figure.
func TestHostileGroup(t *testing.T) {
	fs := tree(t, merge(v1Group(v1Root+"evil\x1b]0;x\x07"), map[string]string{
		"proc/self/mountinfo": hybridMounts,
		"proc/9/cgroup":       "4:memory:/evil\x1b]0;x\x07\n",
	}))
	r, err := Of(fs, 9)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(r.Group, "\x1b\x07") {
		t.Errorf("group %q is not escaped", r.Group)
	}
	bad := tree(t, merge(v1Group(v1Root+"cg"), map[string]string{v1Root + "cg/memory.failcnt": "lots\n"}))
	if _, err := Dir(bad, "/sys/fs/cgroup/memory/cg"); err == nil || !strings.Contains(err.Error(), "memory.failcnt") {
		t.Errorf("a failcnt of words: %v", err)
	}
}
