package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/memcg"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/window"
)

// memstallReport is a run in which a thread waited in memory stalls,
// most of that time of kind main (with a stack), the rest of another kind.
func memstallReport(main, other string) *Report {
	waitPath := stall.NewStack(kframes("asm_exc_page_fault", "exc_page_fault", "handle_mm_fault", "filemap_fault",
		"folio_wait_bit_common", "io_schedule"), uframes("/usr/bin/thrash", "main", "touch"), "")
	a := aggregate.New(window.Grid{StartNs: 0, LenNs: 1e9})
	snap := &stall.Snapshot{System: stall.SystemStats{StacksTaken: 3}}
	add := func(kind string, dur uint64, s *stall.Stack) {
		a.Add(&stall.Event{Kind: stall.KindStall, Cause: stall.MemstallWait, Reason: kind, TsNs: 1, DurNs: dur,
			PID: 30, TID: 31, Comm: "thrash", Stack: s})
		th := snap.Thread(30, 31, "thrash")
		if th.Hists[stall.MemstallWait] == nil {
			th.Hists[stall.MemstallWait] = &stall.Hist{}
		}
		th.Hists[stall.MemstallWait].Add(dur)
	}
	for range 3 {
		add(main, 4_000_000, waitPath)
	}
	add(other, 1_000_000, nil)
	return &Report{Target: "pid 30 (thrash)", Kernel: "6.18.0", DurationNs: 10e9, Summary: a.Summarize(snap), StacksMinNs: 1e6}
}

// memstall_wait is named with the kind of wait most of its time was,
// everywhere the report names it: the thread and process tables, the
// histogram and the stacks (each stack with its stalls' kind), the
// headline's verdict and worst threads, and the JSON; and the next step
// is that kind's.
func TestMemstallWaitIsNamedWithItsKind(t *testing.T) {
	r := memstallReport("thrashing", "swap_in")
	var b bytes.Buffer
	if err := r.Text(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	flat := strings.Join(strings.Fields(text), " ")
	for _, want := range []string{
		"most of it memstall_wait (thrashing) (13.00ms)",                                // the verdict
		"most in memstall_wait (thrashing) (13.00ms, longest 4.00ms)",                   // WORST
		"NEXT: the threads waited to read back pages evicted while still in use",        // the kind's advice
		"30 31 thrash memstall_wait (thrashing) 4 13.00ms",                              // THREADS
		"30 thrash 1 13.00ms memstall_wait (thrashing)",                                 // PROCESSES
		"memstall_wait (thrashing) of tid 31 (thrash): 4 stalls, total 13.00ms",         // the histogram
		"memstall_wait (thrashing) in tid 31 (thrash): 12.00ms of its 13.00ms",          // STACKS
		"100% 12.00ms in 3 stalls of thrashing user main → touch kernel exc_page_fault", // the stack, with its kind
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
	var js struct {
		Headline struct {
			Worst []struct {
				Cause  string `json:"cause"`
				Reason string `json:"reason"`
			} `json:"worst_threads"`
		} `json:"headline"`
		Threads []struct {
			Stalls map[string]struct {
				Reason string `json:"reason"`
			} `json:"stalls"`
		} `json:"threads"`
		Processes []struct {
			Stalls map[string]struct {
				Reason string `json:"reason"`
			} `json:"stalls"`
		} `json:"processes"`
		Causes map[string]struct {
			Reason string `json:"reason"`
		} `json:"causes"`
		Stacks []struct {
			Cause  string `json:"cause"`
			Reason string `json:"reason"`
		} `json:"stacks"`
	}
	raw, err := json.Marshal(r.summaryLine())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &js); err != nil {
		t.Fatal(err)
	}
	if w := js.Headline.Worst; len(w) != 1 || w[0].Cause != "memstall_wait" || w[0].Reason != "thrashing" ||
		js.Threads[0].Stalls["memstall_wait"].Reason != "thrashing" || js.Processes[0].Stalls["memstall_wait"].Reason != "thrashing" ||
		js.Causes["memstall_wait"].Reason != "thrashing" || len(js.Stacks) != 1 || js.Stacks[0].Reason != "thrashing" {
		t.Errorf("the JSON does not name the kind everywhere: %s", raw)
	}
	// Of kind memory_high, with the group read: the group is the next step.
	r = memstallReport("memory_high", "thrashing")
	r.MemoryCgroup = memcg.Span{End: &memcg.Reading{Group: "system.slice/app.service", V2: true, Limit: memcg.Unlimited, High: 32 << 20,
		Usage: 33 << 20, File: 1 << 20, Events: memcg.Events{High: 900}}}
	if next := r.Headline().Next; !strings.HasPrefix(next, "the cgroup system.slice/app.service reached its memory.high (32 MiB; usage 33 MiB") ||
		!strings.Contains(next, "raise memory.high") {
		t.Errorf("memory_high's next step: %q", next)
	}
}
