package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

func kframes(names ...string) []stall.Frame {
	var fs []stall.Frame
	for i := len(names) - 1; i >= 0; i-- { // given outermost first, kept innermost first
		fs = append(fs, stall.Frame{Addr: 0xffffffff81000000 + uint64(i), Func: names[i], Module: stall.KernelModule})
	}
	return fs
}

func uframes(module string, names ...string) []stall.Frame {
	var fs []stall.Frame
	for i := len(names) - 1; i >= 0; i-- {
		fs = append(fs, stall.Frame{Addr: 0x401000 + uint64(i), Func: names[i], Module: module, BuildID: "ab12", Offset: 0x1000 + uint64(i)})
	}
	return fs
}

// stackReport is a run whose redis thread stalled in memcg reclaim from
// two places, one stall of them without a stack, and whose bgsave child
// has a one-frame stack and a note.
func stackReport() *Report {
	syscallPath := kframes("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "ksys_read", "vfs_read", "filemap_read",
		"filemap_get_pages", "page_cache_ra_order", "filemap_add_folio", "__mem_cgroup_charge", "charge_memcg",
		"try_charge_memcg", "try_to_free_mem_cgroup_pages")
	fromRead := stall.NewStack(syscallPath, uframes("/usr/bin/redis-server", "main", "aeMain", "readQueryFromClient", "connRead", "read"), "")
	fromFault := stall.NewStack(kframes("asm_exc_page_fault", "exc_page_fault", "handle_mm_fault", "__mem_cgroup_charge",
		"try_charge_memcg", "try_to_free_mem_cgroup_pages"), uframes("/usr/bin/redis-server", "main", "aeMain", "je_malloc\x1b]0;x\x07"), "")
	child := stall.NewStack(kframes("try_to_free_mem_cgroup_pages"), uframes("/usr/lib/libc.so.6", "write"),
		"user stack cut at write in libc.so.6: it keeps no frame pointer")
	a := aggregate.New(window.Grid{StartNs: 0, LenNs: 1e9})
	snap := &stall.Snapshot{System: stall.SystemStats{StacksTaken: 9, UserStacksLost: 1}}
	add := func(pid, tid uint32, comm string, dur uint64, s *stall.Stack) {
		a.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: 1, DurNs: dur, PID: pid, TID: tid, Comm: comm, Stack: s})
		th := snap.Thread(pid, tid, comm)
		if th.Hists[stall.MemcgReclaim] == nil {
			th.Hists[stall.MemcgReclaim] = &stall.Hist{}
		}
		th.Hists[stall.MemcgReclaim].Add(dur)
	}
	for range 6 {
		add(10, 10, "redis-server", 3_000_000, fromRead)
	}
	add(10, 10, "redis-server", 2_000_000, fromFault)
	add(10, 10, "redis-server", 2_000_000, fromFault)
	add(10, 10, "redis-server", 500_000, nil) // under --stacks-min
	add(20, 20, "redis-rdb-bgsave", 1_500_000, child)
	return &Report{Target: "pid 10 (redis-server)", Kernel: "6.18.0", DurationNs: 10e9, Summary: a.Summarize(snap),
		StacksMinNs: 1_000_000, Events: 10, Windows: 10,
		Probes: []stall.ProbeStatus{{Name: "memcg_reclaim", Attached: true}}}
}

func TestStacksText(t *testing.T) {
	var buf bytes.Buffer
	if err := stackReport().Text(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "stacks.txt", buf.Bytes())
	out := buf.String()
	section := out[strings.Index(out, "\nSTACKS"):]
	section = section[:strings.Index(section, "\nSYSTEM")]
	for _, want := range []string{
		"STACKS (9 stalls of 1ms or more took their stacks; not taken: 0 kernel, 1 user)",
		"memcg_reclaim in tid 10 (redis-server): 22.00ms of its 22.50ms in stalls with stacks",
		"   82% 18.00ms in 6 stalls",
		"user   main → aeMain → readQueryFromClient → connRead → read",
		"kernel ksys_read → vfs_read → … → try_charge_memcg → try_to_free_mem_cgroup_pages",
		"user   main → aeMain → je_malloc\\x1b]0;x\\x07",
		"memcg_reclaim in tid 20 (redis-rdb-bgsave): 1.50ms of its 1.50ms in stalls with stacks",
		"(user stack cut at write in libc.so.6: it keeps no frame pointer)",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("the stacks section lacks %q:\n%s", want, section)
		}
	}
	for _, l := range strings.Split(section, "\n") {
		if n := utf8.RuneCountInString(l); n > stackWidth {
			t.Errorf("a line of %d columns, over %d: %q", n, stackWidth, l)
		}
	}
}

// A run without stacks says nothing of them; one with --stacks-min whose
// stalls were all shorter says so.
func TestStacksTextWhenThereAreNone(t *testing.T) {
	r := stackReport()
	r.Summary.Stacks, r.StacksMinNs = nil, 0
	var buf bytes.Buffer
	r.Text(&buf)
	if strings.Contains(buf.String(), "STACKS") {
		t.Errorf("a run without stacks has a stacks section:\n%s", buf.String())
	}
	r.StacksMinNs = 1_000_000
	buf.Reset()
	r.Text(&buf)
	if !strings.Contains(buf.String(), "STACKS (9 stalls of 1ms or more took their stacks") || !strings.Contains(buf.String(), "no stall was long enough") {
		t.Errorf("a run with --stacks-min and no stacks does not say so:\n%s", buf.String())
	}
}

// Stalls counted under a stack a bound left out are said in the
// section's heading, and under the note that says which bound.
func TestStacksTextSaysWhatWasLeftOut(t *testing.T) {
	r := stackReport()
	left := stall.LeftOutStack("stack left out: past 1 MiB")
	r.Summary.Stacks = append(r.Summary.Stacks, aggregate.StackSample{Cause: stall.MemcgReclaim, PID: 10, TID: 10,
		Comm: "redis-server", Count: 2, Ns: 300_000, Stack: left})
	aggregate.SortStackSamples(r.Summary.Stacks)
	var buf bytes.Buffer
	if err := r.Text(&buf); err != nil {
		t.Fatal(err)
	}
	words := strings.Join(strings.Fields(buf.String()), " ") // the heading wraps
	for _, want := range []string{
		"STACKS (9 stalls of 1ms or more took their stacks; not taken: 0 kernel, 1 user; left out: the stacks of 2 stalls)",
		"(stack left out: past 1 MiB)",
	} {
		if !strings.Contains(words, want) {
			t.Errorf("the report lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestStacksJSON(t *testing.T) {
	r := stackReport()
	b, err := json.Marshal(r.summaryLine())
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Stacks []struct {
			Cause   string `json:"cause"`
			PID     uint32 `json:"pid"`
			TID     uint32 `json:"tid"`
			Process string `json:"process"`
			Count   uint64 `json:"count"`
			TotalNs uint64 `json:"total_ns"`
			Kernel  []struct {
				Func string `json:"func"`
			} `json:"kernel"`
			User []struct {
				Func    string `json:"func"`
				Module  string `json:"module"`
				Offset  uint64 `json:"offset"`
				BuildID string `json:"build_id"`
			} `json:"user"`
			Note string `json:"note"`
		} `json:"stacks"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Stacks) != 3 {
		t.Fatalf("%d stacks, want 3: %s", len(s.Stacks), b)
	}
	top := s.Stacks[0]
	if top.Cause != "memcg_reclaim" || top.TID != 10 || top.Process != "redis-server" || top.Count != 6 || top.TotalNs != 18_000_000 ||
		top.Kernel[0].Func != "try_to_free_mem_cgroup_pages" || top.User[0].Func != "read" ||
		top.User[0].Module != "/usr/bin/redis-server" || top.User[0].BuildID != "ab12" || top.User[0].Offset == 0 {
		t.Errorf("the top stack: %+v", top)
	}
	if s.Stacks[2].Note == "" || s.Stacks[2].Process != "redis-rdb-bgsave" {
		t.Errorf("the child's stack: %+v", s.Stacks[2])
	}
}

func TestStallLineCarriesItsStack(t *testing.T) {
	s := stall.NewStack(kframes("ksys_read", "try_to_free_mem_cgroup_pages"), uframes("/bin/x", "main", "read"), "a note")
	ev := stall.Event{Kind: stall.KindStall, Cause: stall.MemcgReclaim, TsNs: 5, DurNs: 7, PID: 1, TID: 2, Comm: "x", Stack: s,
		Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1}
	var line map[string]any
	if err := json.Unmarshal(AppendStallLine(nil, &ev), &line); err != nil {
		t.Fatal(err)
	}
	k, u := line["kernel_stack"].([]any), line["user_stack"].([]any)
	if len(k) != 2 || k[0] != "try_to_free_mem_cgroup_pages" || len(u) != 2 || u[0] != "read" || line["stack_note"] != "a note" {
		t.Errorf("stall line %v", line)
	}
	b, err := json.Marshal(DetailsOf(&ev))
	if err != nil || !strings.Contains(string(b), `"user_stack":["read","main"]`) {
		t.Errorf("the details Perfetto shows: %s (%v)", b, err)
	}
	ev.Stack = nil
	if b := AppendStallLine(nil, &ev); strings.Contains(string(b), "stack") {
		t.Errorf("a stall without a stack: %s", b)
	}
}

func TestFitPath(t *testing.T) {
	names := []string{"main", "aeMain", "readQueryFromClient", "connRead", "read"}
	if got := FitPath(names, 100); got != "main → aeMain → readQueryFromClient → connRead → read" {
		t.Errorf("a path that fits: %q", got)
	}
	if got := FitPath(names, 30); got != "main → aeMain → … → read" {
		t.Errorf("fitted to 30: %q", got)
	}
	if got := FitPath(names, 45); got != "main → aeMain → … → connRead → read" || utf8.RuneCountInString(got) > 45 {
		t.Errorf("fitted to 45: %q", got)
	}
	if got := FitPath(names[:3], 5); got != "main → aeMain → readQueryFromClient" {
		t.Errorf("three frames are never cut: %q", got)
	}
}
