package tui

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
)

// Every screen at 80×24 and 60×20 shows what it has without cutting a
// line, and keeps the target and the quit and help keys in sight.
func TestGoldenNothingCut(t *testing.T) {
	screens := []struct {
		name string
		keys []tea.Msg
		also []string // what the screen must still show
	}{
		{"overview", nil, []string{"memcg tot/max", "STALL"}},
		{"by_process", []tea.Msg{runes("g")}, []string{"memcg tot/max", "STALL"}},
		{"thread", []tea.Msg{keyEnter}, []string{"cross-node", "max 26.92ms"}},
		{"spikes", []tea.Msg{keyTab}, []string{"memcg"}},
		{"spikes_wall_clock", []tea.Msg{keyTab, runes("t")}, []string{"03:34:51.699 UTC", "memcg", "t: since start"}},
		{"spike_threads", []tea.Msg{keyTab, keyEnter}, []string{"memcg tot/max", "esc: all"}},
		{"system", []tea.Msg{keyTab, keyTab}, []string{"DOCTOR"}},
		{"help", []tea.Msg{runes("?")}, nil},
	}
	const target = "pid 7044 (redis-server)"
	for _, size := range [][2]int{{80, 24}, {60, 20}} {
		for _, sc := range screens {
			t.Run(fmt.Sprintf("redis_%s_%dx%d", sc.name, size[0], size[1]), func(t *testing.T) {
				m := drive(t, NewReplay(loadPlayer(t, "redis-memcg-hog.ntr"), Options{}), size[0], size[1], sc.keys...)
				view := m.View()
				golden.RequireEqual(t, []byte(view))
				for _, want := range append([]string{target, "q quit", "? help"}, sc.also...) {
					if !strings.Contains(view, want) {
						t.Errorf("%q is not on the screen", want)
					}
				}
				for _, l := range m.lines() {
					if n := ansi.StringWidth(l); n > size[0] {
						t.Errorf("line of %d cells cut to %d: %q", n, size[0], ansi.Strip(l))
					}
				}
			})
		}
	}
}

// A wide terminal gives each cause with stall time a column of its own:
// at 120 columns every shipped recording's overview has a column for
// each cause the report counts stall time of (redis-memcg-hog's showed
// memcg's alone, not mmap_lock's).
func TestWideOverviewHasAColumnPerCause(t *testing.T) {
	paths, err := filepath.Glob(recordings + "*.ntr")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var causes reportCauses
			readReport(t, path, &causes)
			m := drive(t, NewReplay(loadPlayer(t, filepath.Base(path)), Options{}), 120, 30)
			view := m.View()
			for c := range stall.NumCauses {
				if causes.Causes[c.String()].TotalNs > 0 && !strings.Contains(view, c.Desc().Short+" tot/max") {
					t.Errorf("no %s column on the 120-column overview:\n%s", c, view)
				}
			}
			for _, want := range []string{"NODE", "MIGR", "XNODE"} {
				if !strings.Contains(view, want) {
					t.Errorf("no %s column on the 120-column overview", want)
				}
			}
		})
	}
}

type reportCauses struct {
	Causes map[string]reportCause `json:"causes"`
}

// No screen of any shipped recording cuts a line at 80×24 or 60×20, and
// each keeps its target and the help and quit keys in sight.
func TestNoRecordingCutsALine(t *testing.T) {
	paths, err := filepath.Glob(recordings + "*.ntr")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	for _, path := range paths {
		p := loadPlayer(t, filepath.Base(path))
		for _, size := range [][2]int{{80, 24}, {60, 20}} {
			m := NewReplay(p, Options{})
			m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
			m.Update(keyEnter) // the drill-down shows the top thread
			for i := 0; i <= len(m.screens); i++ {
				if i < len(m.screens) {
					m.screen = m.screens[i]
				} else {
					m.Update(runes("?"))
				}
				name := fmt.Sprintf("%s/%dx%d/%s", filepath.Base(path), size[0], size[1], m.name())
				view := m.View()
				for _, want := range []string{sanitize.Text(p.info.Run.Target), "q quit", "? help"} {
					if !strings.Contains(view, want) {
						t.Errorf("%s: %q is not on the screen:\n%s", name, want, view)
					}
				}
				for _, l := range m.lines() {
					if n := ansi.StringWidth(l); n > size[0] {
						t.Errorf("%s: line of %d cells cut to %d: %q", name, n, size[0], ansi.Strip(l))
					}
				}
			}
		}
	}
}

// A new warning on the live view's status line leaves the help and quit
// keys beside it (it took the whole line), at 80 and at 60 columns.
func TestWarningKeepsTheKeys(t *testing.T) {
	for _, w := range []int{80, 60} {
		s := liveStore()
		s.Warn(errors.New("rescan of cgroup /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice failed: too many open files"))
		m := NewLive(s, Options{Now: func() uint64 { return 1 + 2e9 }, NoTicks: true})
		m.Update(tea.WindowSizeMsg{Width: w, Height: 20})
		lines := strings.Split(m.View(), "\n")
		status := lines[len(lines)-1]
		if !strings.HasPrefix(status, "warning: rescan of cgroup") || !strings.HasSuffix(status, "? help  q quit") {
			t.Errorf("%d columns: status line %q", w, status)
		}
		for _, l := range m.lines() {
			if n := ansi.StringWidth(l); n > w {
				t.Errorf("%d columns: line of %d cells: %q", w, n, ansi.Strip(l))
			}
		}
	}
}

// A long reason the live run stopped is shortened in the header, not the
// target after it.
func TestStoppedHeaderKeepsTheTarget(t *testing.T) {
	m := NewLive(liveStore(), Options{Now: func() uint64 { return 1 + 2e9 }, NoTicks: true})
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 20})
	m.Update(EndedMsg{Why: "the target exited after a very long explanation of why it did"})
	header := strings.Split(m.View(), "\n")[0]
	if !strings.HasPrefix(header, "numatrace STOPPED: the target") || !strings.HasSuffix(header, "pid 10 (t11)") {
		t.Errorf("header %q", header)
	}
	if n := ansi.StringWidth(m.lines()[0]); n > 60 {
		t.Errorf("header of %d cells", n)
	}
}
