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

// waitReport is a run in which two of mariadbd's threads slept on the
// disk in one place (one of their sleeps without a stack), and one on a
// lock.
func waitReport() *Report {
	read := stall.NewStack(kframes("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_pread64", "vfs_read",
		"ext4_file_read_iter", "iomap_dio_rw", "io_schedule_timeout", "schedule"), uframes("/usr/sbin/mariadbd", "os_file_read", "pread64"), "")
	lock := stall.NewStack(kframes("__x64_sys_futex", "futex_wait", "schedule"), uframes("/usr/sbin/mariadbd", "lock_sys_t::wr_lock", "futex"), "")
	a := aggregate.New(window.Grid{StartNs: 0, LenNs: 1e9})
	add := func(tid uint32, part string, dur uint64, s *stall.Stack) {
		a.Add(&stall.Event{Kind: stall.KindWait, Reason: part, TsNs: 1, DurNs: dur, PID: 10, TID: tid, Comm: "mariadbd", Stack: s})
	}
	for range 3 {
		add(11, "disk_io", 20_000_000, read)
		add(12, "disk_io", 10_000_000, read)
	}
	add(11, "disk_io", 30_000_000, nil)
	add(12, "other_wait", 5_000_000, lock)
	snap := &stall.Snapshot{}
	snap.Thread(10, 11, "mariadbd")
	return &Report{Target: "pid 10 (mariadbd)", Kernel: "6.18.0", DurationNs: 10e9, Summary: a.Summarize(snap),
		StacksMinNs: 1_000_000, Events: 8, Windows: 10}
}

func TestWaitsText(t *testing.T) {
	var buf bytes.Buffer
	if err := waitReport().Text(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	i := strings.Index(out, "\nWAITS")
	if i < 0 {
		t.Fatalf("no WAITS section:\n%s", out)
	}
	section := out[i:]
	section = section[:strings.Index(section, "\nSYSTEM")]
	for _, want := range []string{
		"WAITS (sleeps inside requests of 1ms or more: 8 waits, 125.00ms, 95.00ms of it with stacks)",
		"disk_io: 120.00ms in 7 waits, 90.00ms with stacks",
		"  100% 90.00ms in 6 waits, 2 threads of mariadbd",
		"user   os_file_read → pread64",
		"kernel __x64_sys_pread64 → vfs_read → … → iomap_dio_rw → io_schedule_timeout → schedule",
		"other_wait: 5.00ms in 1 wait, 5.00ms with stacks",
		"  100% 5.00ms in 1 wait, 1 thread of mariadbd",
		"(a thread's first long sleep of a kind has no stack",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("the waits section lacks %q:\n%s", want, section)
		}
	}
	if strings.Index(section, "disk_io:") > strings.Index(section, "other_wait:") {
		t.Errorf("the part with the most time comes first:\n%s", section)
	}
	for _, l := range strings.Split(section, "\n") {
		if n := utf8.RuneCountInString(l); n > stackWidth {
			t.Errorf("a line of %d columns, over %d: %q", n, stackWidth, l)
		}
	}
}

// A run without waits has no WAITS section.
func TestWaitsTextWhenThereAreNone(t *testing.T) {
	r := waitReport()
	r.Summary.Waits = nil
	var buf bytes.Buffer
	if err := r.Text(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "WAITS") {
		t.Errorf("a WAITS section without waits:\n%s", buf.String())
	}
}

func TestWaitsJSON(t *testing.T) {
	b, err := json.Marshal(waitReport().summaryLine())
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Waits []struct {
			Part    string `json:"part"`
			TID     uint32 `json:"tid"`
			Process string `json:"process"`
			Count   uint64 `json:"count"`
			TotalNs uint64 `json:"total_ns"`
			Stacked bool   `json:"stacked"`
			Kernel  []struct {
				Func string `json:"func"`
			} `json:"kernel"`
			User []struct {
				Func string `json:"func"`
			} `json:"user"`
		} `json:"waits"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Waits) != 4 {
		t.Fatalf("%d wait rows, want 4 (a stack in two threads, a thread's waits without one, the lock): %s", len(s.Waits), b)
	}
	top := s.Waits[0]
	if top.Part != "disk_io" || top.TID != 11 || !top.Stacked || top.Count != 3 || top.TotalNs != 60_000_000 ||
		top.Kernel[0].Func != "schedule" || top.User[0].Func != "pread64" || top.Process != "mariadbd" {
		t.Errorf("the top wait row: %+v", top)
	}
	var unstacked int
	for _, w := range s.Waits {
		if !w.Stacked {
			unstacked++
			if w.TotalNs != 30_000_000 || len(w.Kernel) != 0 || w.User == nil {
				t.Errorf("the row without a stack: %+v", w)
			}
		}
	}
	if unstacked != 1 {
		t.Errorf("%d rows without a stack, want 1: %s", unstacked, b)
	}
}
