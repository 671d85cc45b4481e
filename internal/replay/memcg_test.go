package replay

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/memcg"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// The target's memory cgroup as the run started (the header's) and as it
// ended (the end record's): a replay's next step names the group with
// the live run's figures, and a recording cut before its end names it as
// it was at the start.
func TestReplayNamesTheRecordedMemoryCgroup(t *testing.T) {
	start := &memcg.Reading{Group: "memory/numatrace-e2e-redis", Limit: 160 << 20, High: memcg.Unlimited, Usage: 20 << 20, File: 10 << 20, Failcnt: 34}
	end := &memcg.Reading{Group: "memory/numatrace-e2e-redis", Limit: 160 << 20, High: memcg.Unlimited, Usage: 166723584, File: 115 << 20,
		Anon: 40 << 20, Failcnt: 1234}
	d := run.Description{Target: "pid 7 (db)", StartNs: 1000, WindowNs: uint64(time.Second), MemoryCgroup: start}
	fin := run.End{EndNs: 4e9, DurationNs: 4e9 - 1000, Events: 10, Windows: 4, MemoryCgroup: end}
	write := func(withEnd bool) string {
		path := filepath.Join(t.TempDir(), "r.ntr")
		w, err := record.Create(path, record.NewHeader(d, record.Host{}, "test", nil))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			w.Event(&stall.Event{Cause: stall.MemcgReclaim, TsNs: 1000 + uint64(i)*uint64(300*time.Millisecond),
				DurNs: 5e6, PID: 7, TID: 8, Comm: "db", Node: -1, DstNode: -1, SrcCPU: -1, DstCPU: -1})
		}
		if withEnd {
			if err := w.Close(fin); err != nil {
				t.Fatal(err)
			}
		} else {
			w.Flush()
		}
		return path
	}
	const do = ": raise memory.limit_in_bytes, or cut what fills it (page cache counts against the limit)"
	rep := replayFile(t, write(true))
	want := "the cgroup memory/numatrace-e2e-redis reached its limit (160 MiB; usage 159 MiB, 72% of it page cache, failcnt 1,234 (+1,200 over the run))" + do
	if got := rep.Headline().Next; got != want {
		t.Errorf("replay's next step\n%q\nwant\n%q", got, want)
	}
	if live := output.NewReport(d, fin, rep.Summary, nil, 0).Headline().Next; live != want {
		t.Errorf("the live run's next step\n%q\nwant the replay's\n%q", live, want)
	}
	cut := replayFile(t, write(false))
	if got := cut.Headline().Next; !strings.HasPrefix(got, "the cgroup memory/numatrace-e2e-redis reached its limit (160 MiB; usage 20 MiB, 50% of it page cache, failcnt 34)") {
		t.Errorf("a recording cut before its end: %q", got)
	}
}
