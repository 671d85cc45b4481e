//go:build linux

package live

import (
	"reflect"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/topology"
	"github.com/numatrace/numatrace/internal/tui"
)

// The live view is told the run as the engine is, and doctor's report as
// the report is: the values themselves, not a recording's header built
// from them and read back. A finding's invalid byte shows escaped, as
// the text report shows it, not as the U+FFFD a trip through JSON made it.
func TestTheLiveViewIsToldTheRunAndDoctorsReport(t *testing.T) {
	d := run.Description{Target: "pid 7 (db)", Kernel: "6.18", StartNs: 1, WindowNs: 1e9,
		Probes:  []stall.ProbeStatus{{Name: "compaction", Attached: true}, {Name: "numa", Skipped: true}},
		Spikes:  run.Spikes{K: 3, FloorNs: 1e6},
		Latency: run.LatencySource{Kind: run.LatencyFile, Detail: "/tmp/req.log"}}
	d.MinEventNs[stall.Compaction] = 1e5
	topo := &topology.Topology{Nodes: []int{0, 1}, CPUNode: map[int]int{0: 0, 1: 1}, NodeMem: map[int]uint64{0: 1 << 30, 1: 1 << 30}}
	doc := &doctor.Report{Nodes: 2, Findings: []doctor.Finding{{Check: "irq", Severity: doctor.Warn, Title: "eth\xff0 interrupts on node 1"}}}
	fe := &frontEnd{view: true}
	if sinks := fe.sinks(d, topo, doc); len(sinks) != 1 || fe.store == nil {
		t.Fatalf("the view's sinks: %v", sinks)
	}
	in := fe.store.Frame().Info
	if !reflect.DeepEqual(in.Run, d) {
		t.Errorf("the view is told\n%+v\nthe engine\n%+v", in.Run, d)
	}
	if in.Doctor != doc {
		t.Errorf("the view is told a copy of doctor's report: %+v", in.Doctor)
	}
	if in.Machine.Nodes != 2 || !reflect.DeepEqual(in.Machine.CPUNode, topo.CPUNode) {
		t.Errorf("the view's machine: %+v", in.Machine)
	}
	m := tui.NewLive(fe.store, tui.Options{NoTicks: true, Now: func() uint64 { return 2e9 }})
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 40})
	m.Update(tea.KeyMsg{Type: tea.KeyTab})
	m.Update(tea.KeyMsg{Type: tea.KeyTab})
	if v := ansi.Strip(m.View()); !strings.Contains(v, `[warn] eth\xff0 interrupts on node 1`) {
		t.Errorf("the System screen does not show the finding as the report does:\n%s", v)
	}
}
