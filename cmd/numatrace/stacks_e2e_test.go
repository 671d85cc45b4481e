package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// The stack tests' workloads, each run once in one 64 MiB memory
// cgroup under one traced run: memcg reclaim stalls them in a read and
// in page faults. The C program keeps frame pointers or not; the Go one
// is plain or stripped.
var stackProgs = []struct{ name, lang, flags string }{
	{"stackprog-fp", "c", "-fno-omit-frame-pointer"},
	{"stackprog-nofp", "c", "-fomit-frame-pointer"},
	{"stackprog-go", "go", ""},
	{"stackprog-gostrip", "go", "-s -w"},
}

// stackFrame and stackRow are the report's JSON of a stack.
type stackFrame struct {
	Func    string `json:"func"`
	Module  string `json:"module"`
	Offset  uint64 `json:"offset"`
	Addr    uint64 `json:"addr"`
	BuildID string `json:"build_id"`
}

type stackRow struct {
	Cause   string       `json:"cause"`
	PID     uint32       `json:"pid"`
	TID     uint32       `json:"tid"`
	Comm    string       `json:"comm"`
	Process string       `json:"process"`
	Count   uint64       `json:"count"`
	TotalNs uint64       `json:"total_ns"`
	Kernel  []stackFrame `json:"kernel"`
	User    []stackFrame `json:"user"`
	Note    string       `json:"note"`
}

func (r stackRow) user() []string   { return frameNames(r.User) }
func (r stackRow) kernel() []string { return frameNames(r.Kernel) }

func frameNames(fs []stackFrame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Func
	}
	return out
}

type stacksSummary struct {
	Type   string     `json:"type"`
	Stacks []stackRow `json:"stacks"`
	System struct {
		StacksTaken      uint64 `json:"stacks_taken"`
		KernelStacksLost uint64 `json:"kernel_stacks_lost"`
		UserStacksLost   uint64 `json:"user_stacks_lost"`
	} `json:"system"`
}

// stacksSummaryOf is the summary line that ends NDJSON output.
func stacksSummaryOf(t *testing.T, out []byte) stacksSummary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var s stacksSummary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil || s.Type != "summary" {
		t.Fatalf("the last line is not the summary (%v): %.300s", err, lines[len(lines)-1])
	}
	return s
}

// buildStackProgs builds the workloads into dir.
func buildStackProgs(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths := map[string]string{}
	for _, p := range stackProgs {
		out := filepath.Join(dir, p.name)
		var cmd *exec.Cmd
		if p.lang == "c" {
			cmd = exec.Command("gcc", "-O2", p.flags, "-pthread", "-o", out, "testdata/stackprog.c")
		} else {
			cmd = exec.Command("go", "build", "-ldflags="+p.flags, "-o", out, "./testdata/stackprog")
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", p.name, err, b)
		}
		paths[p.name] = out
	}
	return paths
}

// runInCgroup runs prog with args inside the cgroup directory cg and
// returns its pid once it has exited.
func runInCgroup(t *testing.T, cg, prog string, args ...string) int {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg, prog}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", prog, err, out)
	}
	return cmd.Process.Pid
}

// TestStacksOfRealStalls traces the workloads once, with serve beside
// the traced run, and checks every way the stacks leave numatrace: the
// report's JSON, the recording replayed without the programs' files, the
// pprof and folded exports, and serve's stall profile.
func TestStacksOfRealStalls(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	progs := buildStackProgs(t, dir)
	const cgName = "numatrace-e2e-stacks"
	cg := testutil.MemcgCgroup(t, cgName, 64<<20)
	file := testutil.BigFile(t)
	rec := filepath.Join(dir, "stacks.ntr")

	listen, _, serveErr := startServe(t, "--stacks-min", "2us")
	nt := startAttach(t, "--cgroup", "memory/"+cgName, "--json", "--record", rec, "--stacks-min", "2us", "--duration", "120s")

	pids := map[string]int{}
	pids["stackprog-fp"] = runInCgroup(t, cg, progs["stackprog-fp"], file, "heap")
	// serve's profile of the last minute, fetched as Pyroscope or a user
	// would, while the C program's stalls are the newest.
	profile := filepath.Join(dir, "serve.pb.gz")
	if out, err := exec.Command("curl", "-sSf", "-o", profile, "http://"+listen+"/debug/pprof/stalls?seconds=60").CombinedOutput(); err != nil {
		t.Fatalf("curl: %v\n%s\nserve: %s", err, out, serveErr.String())
	}
	for _, p := range stackProgs[1:] {
		pids[p.name] = runInCgroup(t, cg, progs[p.name], file, "heap")
	}
	nt.cmd.Process.Signal(os.Interrupt)
	nt.wait(t, 30*time.Second)
	live := stacksSummaryOf(t, nt.stdout.Bytes())
	if live.System.StacksTaken == 0 || live.System.KernelStacksLost != 0 || live.System.UserStacksLost != 0 {
		t.Errorf("stacks taken %d, not taken %d kernel and %d user; want some taken and none lost",
			live.System.StacksTaken, live.System.KernelStacksLost, live.System.UserStacksLost)
	}
	of := func(name string) []stackRow {
		var rows []stackRow
		for _, r := range live.Stacks {
			if int(r.PID) == pids[name] && r.Cause == "memcg_reclaim" {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			t.Fatalf("no memcg_reclaim stacks of %s (pid %d) in %d stacks", name, pids[name], len(live.Stacks))
		}
		return rows
	}
	// has says whether a stack of rows has these user frames, in this
	// order (innermost first, others between them allowed), and a kernel
	// frame matching kernel.
	has := func(rows []stackRow, kernel *regexp.Regexp, user ...string) bool {
		for _, r := range rows {
			if inOrder(r.user(), user) && slices.ContainsFunc(r.kernel(), kernel.MatchString) {
				return true
			}
		}
		return false
	}
	reclaim := regexp.MustCompile(`^try_to_free_mem_cgroup_pages$`)
	fault := regexp.MustCompile(`^(exc_page_fault|do_user_addr_fault|handle_mm_fault)$`)
	dump := func(rows []stackRow) string {
		var b strings.Builder
		for _, r := range rows {
			fmt.Fprintf(&b, "\n  %d stalls: user %v kernel %v note %q", r.Count, r.user(), r.kernel(), r.Note)
		}
		return b.String()
	}

	t.Run("C with frame pointers", func(t *testing.T) {
		rows := of("stackprog-fp")
		if !has(rows, reclaim, "read_the_file", "main") {
			t.Errorf("no reclaim stack from read_the_file in main:%s", dump(rows))
		}
		if !has(rows, fault, "touch_the_heap", "main") || !has(rows, reclaim, "touch_the_heap", "main") {
			t.Errorf("no page fault stack from touch_the_heap in main:%s", dump(rows))
		}
	})
	for _, name := range []string{"stackprog-go", "stackprog-gostrip"} {
		t.Run("Go "+name, func(t *testing.T) {
			rows := of(name)
			if !has(rows, reclaim, "main.readTheFile", "main.main") {
				t.Errorf("no reclaim stack from main.readTheFile in main.main:%s", dump(rows))
			}
			if !has(rows, fault, "main.touchTheHeap", "main.main") {
				t.Errorf("no page fault stack from main.touchTheHeap in main.main:%s", dump(rows))
			}
		})
	}
	t.Run("C without frame pointers", func(t *testing.T) {
		rows := of("stackprog-nofp")
		for _, r := range rows {
			if len(r.User) != 1 || r.User[0].Func == "" || len(r.Kernel) == 0 || !strings.Contains(r.Note, "built without frame pointers") {
				t.Errorf("want the kernel stack, one named user frame and the note that says why:%s", dump([]stackRow{r}))
			}
		}
		if !has(rows, fault, "touch_the_heap") {
			t.Errorf("no page fault stack in touch_the_heap:%s", dump(rows))
		}
	})

	// The recording replays elsewhere: without the programs' files, the
	// same stacks, by the same names.
	t.Run("replay without the binaries", func(t *testing.T) {
		gone := filepath.Join(t.TempDir(), "moved")
		if err := os.Rename(dir, gone); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(gone, dir)
		out, err := exec.Command(binary(t), "report", "--json", filepath.Join(gone, "stacks.ntr")).Output()
		if err != nil {
			t.Fatalf("report: %v", err)
		}
		replayed := stacksSummaryOf(t, out)
		if !reflect.DeepEqual(replayed.Stacks, live.Stacks) {
			t.Errorf("the replayed report's %d stacks differ from the live run's %d", len(replayed.Stacks), len(live.Stacks))
		}
	})

	t.Run("export pprof", func(t *testing.T) {
		prof := filepath.Join(t.TempDir(), "stalls.pb.gz")
		if out, err := exec.Command(binary(t), "export", "--format", "pprof", "-o", prof, rec).CombinedOutput(); err != nil {
			t.Fatalf("export: %v\n%s", err, out)
		}
		top := pprofTop(t, prof)
		for _, fn := range []string{"read_the_file", "touch_the_heap", "main.readTheFile", "try_to_free_mem_cgroup_pages"} {
			if !topHas(top, fn) {
				t.Errorf("go tool pprof -top of the export has no %s:\n%s", fn, top)
			}
		}
	})
	t.Run("export folded", func(t *testing.T) {
		out, err := exec.Command(binary(t), "export", "--format", "folded", rec).Output()
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		line := regexp.MustCompile(`^memcg_reclaim;stackprog-fp;stackprog-fp;(.+;)?main;read_the_file;(.+;)?try_to_free_mem_cgroup_pages_\[k\] [1-9][0-9]*$`)
		found := false
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !regexp.MustCompile(`^[^ ]+ [0-9]+$`).MatchString(sc.Text()) {
				t.Errorf("not a folded line: %q", sc.Text())
			}
			found = found || line.MatchString(sc.Text())
		}
		if !found {
			t.Errorf("no folded line of read_the_file's reclaim in:\n%.3000s", out)
		}
	})
	t.Run("serve's stall profile", func(t *testing.T) {
		if top := pprofTop(t, profile); !topHas(top, "read_the_file") {
			t.Errorf("go tool pprof -top of serve's profile has no read_the_file:\n%s", top)
		}
	})
}

// inOrder says whether want appears in got in order, other frames
// allowed between them.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// pprofTop is `go tool pprof -top` of a profile, as a user reads it.
func pprofTop(t *testing.T, prof string) string {
	t.Helper()
	cmd := exec.Command("go", "tool", "pprof", "-top", prof)
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, out)
	}
	return string(out)
}

// topHas says whether pprof's -top lists fn as an entry of its own.
func topHas(top, fn string) bool {
	for _, l := range strings.Split(top, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[len(f)-1] == fn {
			return true
		}
	}
	return false
}
