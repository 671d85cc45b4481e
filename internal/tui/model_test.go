package tui

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

func TestMain(m *testing.M) {
	// Goldens are plain text: what a NO_COLOR terminal shows.
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

const recordings = "../../testdata/recordings/"

func loadPlayer(t testing.TB, name string) *Player {
	t.Helper()
	r, err := record.Open(recordings + name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := LoadRecording(context.Background(), r, 20)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	keyTab   = tea.KeyMsg{Type: tea.KeyTab}
	keyEnter = tea.KeyMsg{Type: tea.KeyEnter}
	keyEsc   = tea.KeyMsg{Type: tea.KeyEsc}
	keyDown  = tea.KeyMsg{Type: tea.KeyDown}
	keyRight = tea.KeyMsg{Type: tea.KeyRight}
	keyHome  = tea.KeyMsg{Type: tea.KeyHome}
)

func runes(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

// drive runs m as a real Bubble Tea program of the given size, sends the
// keys, quits, and returns the final model.
func drive(t *testing.T, m *Model, w, h int, keys ...tea.Msg) *Model {
	t.Helper()
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h))
	for _, k := range keys {
		tm.Send(k)
	}
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	return tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Model)
}

// The golden screens: shipped recordings, replay opens at the end paused,
// so no clock is involved.
func TestGoldenScreens(t *testing.T) {
	cases := []struct {
		name      string
		recording string
		w, h      int
		keys      []tea.Msg
	}{
		{"redis_overview_80x24", "redis-memcg-hog.ntr", 80, 24, nil},
		{"redis_spikes_80x24", "redis-memcg-hog.ntr", 80, 24, []tea.Msg{keyTab, keyDown}},
		{"redis_spike_threads_80x24", "redis-memcg-hog.ntr", 80, 24, []tea.Msg{keyTab, keyDown, keyEnter}},
		{"redis_thread_80x24", "redis-memcg-hog.ntr", 80, 24, []tea.Msg{keyEnter}},
		{"redis_system_80x24", "redis-memcg-hog.ntr", 80, 24, []tea.Msg{keyTab, keyTab}},
		{"redis_seek_80x24", "redis-memcg-hog.ntr", 80, 24, []tea.Msg{keyHome, keyRight, keyRight, keyRight, keyRight}},
		{"redis_help_80x24", "redis-memcg-hog.ntr", 80, 24, []tea.Msg{runes("?")}},
		{"misplaced_overview_200x50", "vm-6.1-misplaced.ntr", 200, 50, nil},
		{"misplaced_thread_200x50", "vm-6.1-misplaced.ntr", 200, 50, []tea.Msg{keyEnter}},
		{"misplaced_by_process_80x24", "vm-6.1-misplaced.ntr", 80, 24, []tea.Msg{runes("g")}},
		{"thp_overview_80x24", "vm-6.1-thp.ntr", 80, 24, []tea.Msg{runes("s"), runes("s"), runes("s"), runes("s")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := drive(t, NewReplay(loadPlayer(t, c.recording), Options{}), c.w, c.h, c.keys...)
			golden.RequireEqual(t, []byte(m.View()))
		})
	}
}

// liveInfo is what a live view of a two-node machine is told, with
// doctor's report doc.
func liveInfo(doc *doctor.Report) Info {
	return Info{Run: run.Description{Target: "pid 10 (t11)", Kernel: "6.18", Probes: probes(12, 13), StartNs: 1, WindowNs: 1e9},
		Machine: Machine{Nodes: 2, CPUNode: map[int]int{0: 0, 1: 1}}, Doctor: doc}
}

// probes are total probes asked for, attached of them attached.
func probes(attached, total int) []stall.ProbeStatus {
	ps := make([]stall.ProbeStatus, total)
	for i := range ps {
		ps[i] = stall.ProbeStatus{Name: fmt.Sprintf("probe%d", i), Attached: i < attached}
	}
	return ps
}

// liveStore is a live store fed like the session feeds it.
func liveStore() *Store {
	s := NewStore(liveInfo(nil), liveWindowsForTest)
	feed(s)
	return s
}

const liveWindowsForTest = 100

func TestGoldenLive(t *testing.T) {
	now := func() uint64 { return 1 + 2e9 }
	m := drive(t, NewLive(liveStore(), Options{Now: now, NoTicks: true}), 80, 24)
	golden.RequireEqual(t, []byte(m.View()))
}

// Every screen in the model's list, and the help, fills the terminal and
// no more.
func TestEveryScreenFitsTheTerminal(t *testing.T) {
	p := loadPlayer(t, "redis-memcg-hog.ntr")
	for _, size := range [][2]int{{80, 24}, {200, 50}, {40, 10}, {120, 30}} {
		m := NewReplay(p, Options{})
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		m.Update(keyEnter) // the drill-down shows the top thread
		for i := 0; i <= len(m.screens); i++ {
			if i < len(m.screens) {
				m.screen = m.screens[i]
			} else {
				m.Update(runes("?"))
			}
			t.Run(fmt.Sprintf("%dx%d/%s", size[0], size[1], m.name()), func(t *testing.T) {
				fits(t, m.View(), size[0], size[1])
			})
		}
	}
}

func fits(t *testing.T, view string, w, h int) {
	lines := strings.Split(view, "\n")
	if len(lines) != h {
		t.Errorf("%d lines", len(lines))
	}
	for _, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			t.Errorf("line of %d cells: %q", n, l)
		}
	}
}

// sizeSpy is a screen that counts the sizes it is given.
type sizeSpy struct {
	screen
	w, h int
}

func (s *sizeSpy) SetSize(w, h int) { s.w, s.h = w, h }

// A resize reaches every screen in the model's list.
func TestEveryScreenGetsItsSize(t *testing.T) {
	m := NewReplay(loadPlayer(t, "redis-memcg-hog.ntr"), Options{})
	spies := make([]*sizeSpy, len(m.screens))
	for i, s := range m.screens {
		spies[i] = &sizeSpy{screen: s}
		m.screens[i] = spies[i]
	}
	m.Update(tea.WindowSizeMsg{Width: 123, Height: 45})
	for i, s := range spies {
		if s.w != 123 || s.h != 45 {
			t.Errorf("screen %d (%T) got size %dx%d, want 123x45", i, s.screen, s.w, s.h)
		}
	}
}

// Every type in this package with a screen's SetSize is in the model's
// screen list: a screen left out of screenDefs would never be shown,
// sized or helped.
func TestEveryScreenIsInTheModelsList(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, s := range NewReplay(loadPlayer(t, "redis-memcg-hog.ntr"), Options{}).screens {
		listed[reflect.TypeOf(s).Elem().Name()] = true
	}
	for _, f := range pkgs["tui"].Files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "SetSize" {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			if name := star.X.(*ast.Ident).Name; !listed[name] {
				t.Errorf("%s has SetSize but is not in screenDefs", name)
			}
		}
	}
}

func TestReplayPlaysSeeksAndRestarts(t *testing.T) {
	p := loadPlayer(t, "redis-memcg-hog.ntr")
	m := NewReplay(p, Options{NoTicks: true, Speed: 2})
	n := p.Len()
	if n < 50 || p.Pos() != n {
		t.Fatalf("opened at window %d of %d, want the end", p.Pos(), n)
	}
	m.Update(runes(" ")) // at the end, space plays from the start
	if p.Pos() != 0 || !m.playing {
		t.Fatalf("space at the end: pos %d playing %v", p.Pos(), m.playing)
	}
	// At ×2 a 250 ms tick covers 500 ms: one 500 ms window.
	for i := 0; i < 4; i++ {
		m.Update(TickMsg{})
	}
	if p.Pos() != 4 {
		t.Errorf("after 4 ticks at ×2: window %d, want 4", p.Pos())
	}
	m.Update(runes(" "))
	m.Update(TickMsg{})
	if p.Pos() != 4 || m.playing {
		t.Errorf("paused, yet moved to %d", p.Pos())
	}
	m.Update(tea.KeyMsg{Type: tea.KeyShiftRight})
	if p.Pos() != 14 {
		t.Errorf("shift+right: %d, want 14", p.Pos())
	}
	m.Update(tea.KeyMsg{Type: tea.KeyLeft})
	if p.Pos() != 13 {
		t.Errorf("left: %d, want 13", p.Pos())
	}
	// Going back rebuilds the view: it must equal a fresh seek.
	fresh := loadPlayer(t, "redis-memcg-hog.ntr")
	fresh.Seek(13)
	a, b := p.Store().Frame(), fresh.Store().Frame()
	if len(a.Rows) != len(b.Rows) || len(a.Windows) != 13 || len(b.Windows) != 13 || a.Events != b.Events {
		t.Errorf("seek back: %d rows %d windows %d events; fresh: %d rows %d windows %d events",
			len(a.Rows), len(a.Windows), a.Events, len(b.Rows), len(b.Windows), b.Events)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyEnd})
	if p.Pos() != n {
		t.Errorf("end: %d, want %d", p.Pos(), n)
	}
}

func TestFilterSortAndDrillDown(t *testing.T) {
	m := NewReplay(loadPlayer(t, "redis-memcg-hog.ntr"), Options{NoTicks: true})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 100})
	m.Update(runes("/"))
	for _, r := range "jemalloc" {
		m.Update(runes(string(r)))
	}
	m.Update(keyEnter)
	rows := m.rows()
	if len(rows) != 1 || rows[0].Comm != "jemalloc_bg_thd" {
		t.Fatalf("filter: %+v", rows)
	}
	if !strings.Contains(m.View(), "filter: jemalloc") {
		t.Error("the status line does not show the filter")
	}
	m.Update(keyEsc)
	if m.over.filter.Value() != "" || len(m.rows()) < 2 {
		t.Error("esc did not clear the filter")
	}
	m.Update(runes("s"))
	if m.over.sortKey != SortCause0 {
		t.Errorf("s: sort %v", m.over.sortKey)
	}
	m.Update(runes("S"))
	m.Update(keyEnter)
	if m.screen != m.thread || m.thread.tid != m.rows()[0].TID {
		t.Fatalf("enter: screen %s tid %d", m.name(), m.thread.tid)
	}
	v := m.View()
	for _, want := range []string{"HISTOGRAMS", "memcg_reclaim:", "TIMELINE", "RECENT STALLS", "reclaimed"} {
		if !strings.Contains(v, want) {
			t.Errorf("drill-down lacks %q", want)
		}
	}
	m.Update(keyEsc)
	if m.screen != m.over {
		t.Errorf("esc: screen %s", m.name())
	}
}

func TestLivePauseFreezesTheFrame(t *testing.T) {
	s := liveStore()
	m := NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 5e9 }})
	m.Update(runes("p"))
	s.Window(&aggregate.Window{Index: 2, StartNs: 2e9, EndNs: 3e9, Threads: map[uint32]*aggregate.ThreadWindow{
		99: {PID: 99, TID: 99, Comm: "late", TotalNs: 5}}})
	m.Update(TickMsg{})
	if len(m.frame.Windows) != 2 || !strings.Contains(m.View(), "LIVE (paused)") {
		t.Fatalf("paused view took new data: %d windows", len(m.frame.Windows))
	}
	m.Update(runes("p"))
	if len(m.frame.Windows) != 3 {
		t.Fatalf("unpaused view: %d windows, want 3", len(m.frame.Windows))
	}
	m.Update(EndedMsg{Why: "the target exited"})
	if !strings.Contains(m.View(), "STOPPED: the target exited") {
		t.Error("the header does not say tracing stopped")
	}
}

func TestSpikeJumpShowsThatWindowsThreads(t *testing.T) {
	m := NewReplay(loadPlayer(t, "redis-memcg-hog.ntr"), Options{NoTicks: true})
	m.Update(keyTab)
	if m.frame.Analysis == nil || len(m.frame.Analysis.Spikes) == 0 {
		t.Fatal("the redis recording has no spikes")
	}
	sp := m.frame.Analysis.Spikes[0]
	m.Update(keyEnter)
	rows := m.rows()
	if m.screen != m.over || m.over.focus == nil || *m.over.focus != sp.Index || len(rows) == 0 {
		t.Fatalf("jump: screen %s focus %v rows %d", m.name(), m.over.focus, len(rows))
	}
	if rows[0].StallNs != sp.Causes[0].WorstNs {
		t.Errorf("the window's worst thread stalled %d ns; the spike says %d", rows[0].StallNs, sp.Causes[0].WorstNs)
	}
	m.Update(keyEsc)
	if m.over.focus != nil {
		t.Error("esc kept the window focus")
	}
}

func TestNoColorMarksCausesWithLetters(t *testing.T) {
	m := NewLive(liveStore(), Options{NoTicks: true})
	if v := m.View(); !strings.Contains(v, "M memcg") || strings.Contains(v, "\x1b[") {
		t.Errorf("NO_COLOR view has colour or no letters:\n%s", v)
	}
	lipgloss.SetColorProfile(termenv.ANSI256)
	defer lipgloss.SetColorProfile(termenv.Ascii)
	if v := m.View(); !strings.Contains(v, "\x1b[") {
		t.Error("a colour terminal got no colour")
	}
	t.Setenv("NO_COLOR", "1")
	HonourNoColor()
	if lipgloss.ColorProfile() != termenv.Ascii {
		t.Error("NO_COLOR=1 left colour on")
	}
}

// BenchmarkFrame10kThreads renders one overview frame of a replay with
// 10,000 threads: taking the frame, sorting and drawing it (the issue's
// target: under 50 ms).
func BenchmarkFrame10kThreads(b *testing.B) {
	s := NewStore(Info{Run: run.Description{WindowNs: 1e9}, Machine: Machine{CPUNode: map[int]int{0: 0, 1: 1}}}, 0)
	for wi := uint64(0); wi < 300; wi++ {
		w := &aggregate.Window{Index: wi, StartNs: wi * 1e9, EndNs: (wi + 1) * 1e9, Threads: map[uint32]*aggregate.ThreadWindow{},
			Latency: &latency.Stats{Index: wi, Count: 100, P99Ns: 1e6 + wi%7*1e6}}
		for i := uint32(0); i < 10000; i += 97 { // a hundred threads stall per window
			tid := (i + uint32(wi)*31) % 10000
			tw := &aggregate.ThreadWindow{PID: tid / 10, TID: tid, Comm: "worker", TotalNs: 1000 + uint64(tid)}
			tw.ByCause[stall.MemcgReclaim] = aggregate.CauseTotal{Count: 1, TotalNs: tw.TotalNs, MaxNs: tw.TotalNs}
			w.Threads[tid] = tw
			w.Causes[stall.MemcgReclaim].TotalNs += tw.TotalNs
		}
		s.Window(w)
	}
	snap := &stall.Snapshot{Threads: map[uint32]*stall.ThreadStats{}}
	for tid := uint32(0); tid < 10000; tid++ {
		snap.Threads[tid] = &stall.ThreadStats{PID: tid / 10, TID: tid, Comm: "worker", Migrations: uint64(tid % 5), Hists: map[stall.Cause]*stall.Hist{}}
	}
	s.Snapshot(snap)
	m := NewLive(s, Options{NoTicks: true})
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	if n := len(m.frame.Rows); n != 10000 {
		b.Fatalf("%d threads", n)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.refresh()
		_ = m.View()
	}
}

func TestSystemScreenShowsDoctorFindings(t *testing.T) {
	s := NewStore(liveInfo(&doctor.Report{Findings: []doctor.Finding{{Severity: doctor.Crit,
		Title: "pid 4242 runs on node(s) 0 but may only allocate on node(s) 1: every access is remote"}}}), liveWindowsForTest)
	feed(s)
	m := NewLive(s, Options{NoTicks: true})
	m.Update(keyTab)
	m.Update(keyTab)
	if v := m.View(); !strings.Contains(v, "DOCTOR") || !strings.Contains(v, "[crit] pid 4242 runs on node(s) 0") {
		t.Errorf("System screen lacks the finding:\n%s", v)
	}
}

// A warning takes the status line for a while instead of being printed
// over the view, and the System screen keeps it.
func TestWarningsShowInTheView(t *testing.T) {
	s := liveStore()
	s.Warn(errors.New("scrape http://127.0.0.1:9/metrics: connection refused"))
	m := NewLive(s, Options{NoTicks: true})
	lines := strings.Split(m.View(), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "warning: scrape http://127.0.0.1:9/metrics") {
		t.Errorf("status line %q", last)
	}
	m.Update(keyTab)
	m.Update(keyTab)
	if v := m.View(); !strings.Contains(v, "connection refused") {
		t.Errorf("the System screen lacks the warning:\n%s", v)
	}
}

// Evicted thread histograms are said in the header, next to lost events.
func TestHeaderSaysEvictedHistograms(t *testing.T) {
	s := liveStore()
	m := NewLive(s, Options{NoTicks: true, Now: func() uint64 { return 5e9 }})
	if strings.Contains(m.View(), "evicted") {
		t.Fatal("the header speaks of evictions before any")
	}
	s.Snapshot(&stall.Snapshot{HistEvicted: 19712})
	m.Update(TickMsg{})
	if !strings.Contains(m.View(), "evicted 19712") {
		t.Errorf("the header does not say 19712 histograms were evicted:\n%s", m.View())
	}
}

// name is the screen on show's, for tests and messages.
func (m *Model) name() string {
	if m.help {
		return "help"
	}
	if n := screenDefs[m.index(m.screen)].tab; n != "" {
		return n
	}
	return "drill-down"
}
