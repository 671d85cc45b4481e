package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
)

// A --pid server that stalls nothing while its children do: the view
// says so above the table, as the report does, in the width it has.
func TestOverviewSaysTheChildrenStalled(t *testing.T) {
	s := NewStore(Info{Run: run.Description{Target: "pid 4242 (postgres)", Kernel: "6.18", StartNs: 1, WindowNs: 1e9}, Machine: Machine{Nodes: 1}}, 10)
	m := NewLive(s, Options{Now: func() uint64 { return 2e9 }, NoTicks: true})
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 20})
	if strings.Contains(m.View(), "child process") {
		t.Fatalf("a hint before any snapshot:\n%s", m.View())
	}
	s.Snapshot(&stall.Snapshot{Descendants: &stall.Descendants{Stalled: 30,
		Causes: map[stall.Cause]stall.StallTime{stall.MemcgReclaim: {Count: 4800, TotalNs: 1_520_000_000}}}})
	m.refresh()
	view := m.View()
	flat := strings.Join(strings.Fields(view), " ")
	want := "pid 4242 (postgres) stalled nothing, but its 30 child processes stalled 1.52s in memcg_reclaim: trace them with --children (-f)"
	if !strings.Contains(flat, want) {
		t.Errorf("the overview lacks %q:\n%s", want, view)
	}
	if !strings.Contains(view, "--children (-f)") {
		t.Errorf("the flag is broken over two lines:\n%s", view)
	}
	if n := len(strings.Split(view, "\n")); n != 20 {
		t.Errorf("%d lines on a screen of 20", n)
	}
}
