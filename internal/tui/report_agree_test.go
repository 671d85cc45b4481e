package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/replay"
	"github.com/numatrace/numatrace/internal/stall"
)

// reportCause, reportThread and reportProcess are the parts of
// `report --json`'s summary the overview shows.
type reportCause struct {
	Count   uint64 `json:"count"`
	TotalNs uint64 `json:"total_ns"`
	MaxNs   uint64 `json:"max_ns"`
}

type reportMigrations struct {
	Total     uint64 `json:"total"`
	CrossNode uint64 `json:"cross_node"`
}

type reportRow struct {
	PID        uint32                 `json:"pid"`
	TID        uint32                 `json:"tid"`
	Comm       string                 `json:"comm"`
	Threads    int                    `json:"threads"`
	StallNs    uint64                 `json:"stall_ns"`
	Stalls     map[string]reportCause `json:"stalls"`
	Migrations reportMigrations       `json:"migrations"`
}

type reportSummary struct {
	Threads   []reportRow `json:"threads"`
	Processes []reportRow `json:"processes"`
	Evicted   uint64      `json:"histograms_evicted"`
}

// reportJSON is the recording's summary as `numatrace report --json`
// prints it.
func reportJSON(t *testing.T, path string) reportSummary {
	t.Helper()
	var s reportSummary
	readReport(t, path, &s)
	return s
}

// readReport decodes the recording's summary as `numatrace report --json`
// prints it, replayed by replay.Run and printed by output.Print, into v.
func readReport(t *testing.T, path string, v any) {
	t.Helper()
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := replay.Run(context.Background(), r, replay.Options{TopThreads: 20})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := output.Print(rep, output.NewNDJSON(&buf), &buf); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(buf.Bytes(), v); err != nil {
		t.Fatal(err)
	}
}

// overviewRows are the overview's table rows, by thread or by process,
// keyed by tid or pid.
func overviewRows(m *Model, byProcess bool) map[uint32]Row {
	m.over.byProcess = byProcess
	defer func() { m.over.byProcess = false }()
	out := map[uint32]Row{}
	for _, r := range m.rows() {
		id := r.TID
		if byProcess {
			id = r.PID
		}
		out[id] = r
	}
	return out
}

// The overview's thread and process totals are the report's, for every
// shipped recording: its stall time (mmap_lock's with it), each cause's
// count, total and longest, its migrations and its name.
func TestOverviewTotalsAreTheReports(t *testing.T) {
	paths, err := filepath.Glob(recordings + "*.ntr")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			rep := reportJSON(t, path)
			m := NewReplay(loadPlayer(t, filepath.Base(path)), Options{})
			threads, procs := overviewRows(m, false), overviewRows(m, true)
			for _, want := range rep.Threads {
				got, ok := threads[want.TID]
				if !ok {
					t.Errorf("tid %d (%s) is in the report, not in the overview", want.TID, want.Comm)
					continue
				}
				sameRow(t, "tid", want.TID, got, want)
			}
			for _, want := range rep.Processes {
				got, ok := procs[want.PID]
				if !ok {
					t.Errorf("pid %d (%s) is in the report, not in the overview", want.PID, want.Comm)
					continue
				}
				sameRow(t, "pid", want.PID, got, want)
				if got.Threads != want.Threads {
					t.Errorf("pid %d: %d threads in the overview, %d in the report", want.PID, got.Threads, want.Threads)
				}
			}
			if rep.Evicted == 0 && len(procs) != len(rep.Processes) {
				t.Errorf("%d processes in the overview, %d in the report", len(procs), len(rep.Processes))
			}
		})
	}
}

func sameRow(t *testing.T, what string, id uint32, got Row, want reportRow) {
	t.Helper()
	if got.StallNs != want.StallNs {
		t.Errorf("%s %d: stall %d ns in the overview, %d in the report", what, id, got.StallNs, want.StallNs)
	}
	if got.Comm != want.Comm {
		t.Errorf("%s %d: named %q in the overview, %q in the report", what, id, got.Comm, want.Comm)
	}
	if got.Migr != want.Migrations.Total || got.CrossNode != want.Migrations.CrossNode {
		t.Errorf("%s %d: migrations %d (%d cross-node) in the overview, %+v in the report", what, id, got.Migr, got.CrossNode, want.Migrations)
	}
	for c := range stall.NumCauses {
		if !c.Timed() {
			continue
		}
		w := want.Stalls[c.String()]
		g := reportCause{Count: got.ByCause[c].Count, TotalNs: got.ByCause[c].TotalNs, MaxNs: got.ByCause[c].MaxNs}
		if g != w {
			t.Errorf("%s %d %s: %+v in the overview, %+v in the report", what, id, c, g, w)
		}
	}
}

// Sorting by mmap_lock puts the thread with the most mmap_lock time
// first (vm-6.1-misplaced's tid 112, 1.15 s of it; the streamed stalls
// alone had none, so a thread with none led).
func TestSortByCauseLeadsWithItsMost(t *testing.T) {
	m := NewReplay(loadPlayer(t, "vm-6.1-misplaced.ntr"), Options{})
	m.over.sortKey = SortCause0 + SortKey(stall.MmapLock)
	rows := m.rows()
	if len(rows) == 0 || rows[0].ByCause[stall.MmapLock].TotalNs == 0 {
		t.Fatalf("top row %+v has no mmap_lock time", rows[0])
	}
	if rows[0].TID != 112 {
		t.Errorf("tid %d on top, want 112", rows[0].TID)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].ByCause[stall.MmapLock].TotalNs > rows[i-1].ByCause[stall.MmapLock].TotalNs {
			t.Fatalf("row %d (tid %d) has more mmap_lock than the row above it", i, rows[i].TID)
		}
	}
}

// The cause columns explain STALL first: a memory cause takes the one
// column 80 columns have room for before the run queue's wait, which
// STALL leaves out, however long that was.
func TestCauseColumnsExplainStallFirst(t *testing.T) {
	var r Row
	r.ByCause[stall.RunqWait].TotalNs = 60e6
	r.ByCause[stall.MemcgReclaim].TotalNs = 20e6
	r.StallNs = 20e6
	got := tableCauses([]Row{r}, SortTotal, 1)
	if len(got) != 1 || got[0] != stall.MemcgReclaim {
		t.Errorf("columns %v, want [%v]", got, stall.MemcgReclaim)
	}
}
