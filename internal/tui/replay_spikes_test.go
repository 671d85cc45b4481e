package tui

import (
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/numatrace/numatrace/internal/doctor"
)

// After home, the Spikes screen still lists the recording's spikes (it
// said "No latency samples" for a recording that has them), and enter on
// one plays on to its window, so the overview shows its threads.
func TestSpikesKeepTheirSamplesAfterHome(t *testing.T) {
	m := NewReplay(loadPlayer(t, "redis-memcg-hog.ntr"), Options{})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(keyHome)
	m.Update(keyTab)
	view := m.View()
	if strings.Contains(view, "No latency samples") || !strings.Contains(view, "23 spikes") {
		t.Fatalf("Spikes after home:\n%s", view)
	}
	first := m.player.eng.Analysis().Spikes[0]
	m.Update(keyEnter)
	if m.screen != m.over || !windowHeld(m.frame, first.Index) {
		t.Fatalf("enter on the spike of window %d left the replay at %d windows", first.Index, m.player.Pos())
	}
	if rows := m.rows(); len(rows) == 0 {
		t.Errorf("no threads in the spike's window:\n%s", m.View())
	}
}

// A replay's System screen does not send the user to run doctor here (it
// would check this machine, not the recorded one): it says the recording
// has no findings, or shows the recorded machine's.
func TestReplaySystemSaysTheRecordingHasNoFindings(t *testing.T) {
	m := NewReplay(loadPlayer(t, "redis-memcg-hog.ntr"), Options{})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(keyTab)
	m.Update(keyTab)
	view := m.View()
	if strings.Contains(view, "run `numatrace doctor`") || !strings.Contains(view, "this recording has no doctor findings") {
		t.Errorf("System screen of a recording without doctor's reading:\n%s", view)
	}
	m.frame.Info.Doctor = &doctor.Report{Findings: []doctor.Finding{{Severity: doctor.Warn, Title: "numa_balancing is on"}}}
	if view := m.View(); !strings.Contains(view, "[warn] numa_balancing is on") {
		t.Errorf("the recorded findings are not shown:\n%s", view)
	}
}

// t toggles the Spikes list between offsets from the start and the wall
// clock, each spike at the wall-clock time of its window's start as the
// recording's header places it (the report's verdicts use the same).
func TestSpikesShowWallClockOnT(t *testing.T) {
	p := loadPlayer(t, "redis-memcg-hog.ntr")
	m := NewReplay(p, Options{})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(keyTab)
	// The list's rows, not the selected spike's verdict (which always
	// gives its wall clock, as the report does).
	wallRow := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3} UTC `)
	if view := m.View(); !strings.Contains(view, "+6.5s ") || wallRow.MatchString(view) {
		t.Fatalf("Spikes opens with offsets:\n%s", view)
	}
	m.Update(runes("t"))
	view := m.View()
	for _, sp := range p.eng.Analysis().Spikes[:5] {
		want := p.info.Run.Started.Add(time.Duration(sp.StartNs - p.info.Run.StartNs)).UTC().Format("15:04:05.000 UTC")
		if !strings.Contains(view, want+" ") {
			t.Errorf("spike of window %d: %q is not on the screen:\n%s", sp.Index, want, view)
		}
	}
	m.Update(runes("t"))
	if view := m.View(); !strings.Contains(view, "+6.5s ") {
		t.Errorf("t again does not go back to offsets:\n%s", view)
	}
}
