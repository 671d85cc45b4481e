package tui

import (
	"context"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/engine"
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/replay"
	"github.com/numatrace/numatrace/internal/stall"
)

// item is one thing the engine handed on while the recording replayed,
// in the order it came.
type item struct {
	ev     *stall.Event
	win    *aggregate.Window
	snap   *stall.Snapshot
	procfs *record.Procfs
}

// Player holds a whole replayed recording and shows it up to a chosen
// window, so the screen can play, pause and seek. The recording goes
// through the engine once; seeking replays what the engine handed on,
// and the spike analysis is the engine's as it stood at that window.
type Player struct {
	info   Info
	eng    *engine.Engine
	report *output.Report // the whole recording's, as `numatrace report` prints it
	items  []item
	winAt  []int // items index of each window
	store  *Store
	fed    int // items fed to store
	pos    int // windows shown
}

// collector is the engine's sink during the load: it keeps everything in
// order.
type collector struct{ items []item }

func (c *collector) Stall(ev *stall.Event) error {
	e := *ev
	c.items = append(c.items, item{ev: &e})
	return nil
}
func (c *collector) Window(w *aggregate.Window) error {
	c.items = append(c.items, item{win: w})
	return nil
}
func (c *collector) Flush() error { return nil }

// LoadRecording replays r as fast as it can and keeps what it saw, and
// the report of it, whose lists show top rows (--top).
func LoadRecording(ctx context.Context, r *record.Reader, top int) (*Player, error) {
	c := &collector{}
	f := replay.NewFeeder(r.Header(), replay.Options{Sinks: []engine.Sink{c}, TopThreads: top,
		OnSnapshot: func(s record.Snapshot) { c.items = append(c.items, item{snap: s.Data}) },
		OnProcfs:   func(p record.Procfs) { c.items = append(c.items, item{procfs: &p}) },
	})
	r.Parallel(0)
	if err := f.ReadAll(ctx, r, nil); err != nil {
		return nil, err
	}
	rep := f.Finish(r.Blocks())
	// The header is converted here, once, as the engine's description
	// and doctor's report: the view is told the run as the live one is.
	info := Info{Run: f.Engine().Run(), Machine: NewMachine(r.Header().Host.CPUNode, r.Header().Host.NodeMem), Doctor: f.Doctor()}
	p := &Player{info: info, eng: f.Engine(), report: rep, items: c.items}
	for i, it := range p.items {
		if it.win != nil {
			p.winAt = append(p.winAt, i)
		}
	}
	p.Seek(len(p.winAt))
	return p, nil
}

// Len is the number of windows in the recording.
func (p *Player) Len() int { return len(p.winAt) }

// Pos is the number of windows shown.
func (p *Player) Pos() int { return p.pos }

// Seek shows the recording up to and including window k-1 (k windows).
// Going back rebuilds the store from the start.
func (p *Player) Seek(k int) {
	k = min(max(k, 0), len(p.winAt))
	if k < p.pos || p.store == nil {
		p.store = NewStore(p.info, 0)
		p.fed = 0
	}
	end := 0
	if k > 0 {
		end = p.winAt[k-1] + 1
	}
	for ; p.fed < end; p.fed++ {
		it := p.items[p.fed]
		switch {
		case it.ev != nil:
			p.store.Stall(it.ev)
		case it.win != nil:
			p.store.Window(it.win)
		case it.snap != nil:
			p.store.Snapshot(it.snap)
		case it.procfs != nil:
			p.store.Procfs(*it.procfs)
		}
	}
	p.store.Analysis(p.eng.AnalysisAt(uint64(k)))
	p.pos = k
}

// Report is the whole recording's report, wherever the replay stands:
// what quitting the view prints.
func (p *Player) Report() *output.Report { return p.report }

// Analysis is the spike analysis of the whole recording, as the report
// has it.
func (p *Player) Analysis() *correlate.Result { return p.eng.Analysis() }

// ShowWindow plays on to the end of window idx if it is not shown yet,
// and says whether it moved.
func (p *Player) ShowWindow(idx uint64) bool {
	for k, at := range p.winAt {
		if p.items[at].win.Index == idx && k >= p.pos {
			p.Seek(k + 1)
			return true
		}
	}
	return false
}

// Store is what the player shows now.
func (p *Player) Store() *Store { return p.store }
