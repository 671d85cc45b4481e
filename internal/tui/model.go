package tui

import (
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/record"
)

// Tick is how often the screen takes a new frame: live data is batched
// onto it.
const Tick = 250 * time.Millisecond

type screen int

const (
	screenOverview screen = iota
	screenSpikes
	screenSystem
	numScreens
	screenThread // the drill-down, entered from the overview
)

var screenNames = [numScreens]string{"Overview", "Spikes", "System"}

// Options configure a Model.
type Options struct {
	// Now reads CLOCK_MONOTONIC ns for the live elapsed time; tests pass a
	// fixed clock.
	Now func() uint64
	// Speed is the replay's pace: 1 is as recorded.
	Speed float64
	// NoTicks stops the model from scheduling its own ticks (tests send
	// Tick messages themselves).
	NoTicks bool
	// ReadProcfs, if set, is polled every ProcfsEvery for the System
	// screen (live only; a recording carries its own readings).
	ReadProcfs func() (record.Procfs, error)
}

// Model is the Bubble Tea model of every screen.
type Model struct {
	store  *Store  // live
	player *Player // replay
	opt    Options

	frame    *Frame
	corr     *correlate.Result
	corrKey  [2]uint64 // windows analysed: their count and the last index + 1
	corrDone bool
	width    int
	height   int

	screen    screen
	prev      screen
	sortKey   SortKey
	byProcess bool
	filter    textinput.Model
	filtering bool
	selected  int
	focus     *uint64 // a spike's window: the table shows its threads
	detailTID uint32
	scroll    int // drill-down and spikes offset

	paused  bool // live: the frame is frozen
	playing bool // replay
	carry   float64
	help    bool
	ended   string // live: why tracing stopped
	procErr error
}

// TickMsg is the refresh tick; tests send it to step a model.
type TickMsg time.Time

// NewLive shows a live store.
func NewLive(s *Store, opt Options) *Model {
	m := newModel(opt)
	m.store = s
	m.refresh()
	return m
}

// NewReplay shows a loaded recording, opened at its end and paused.
func NewReplay(p *Player, opt Options) *Model {
	m := newModel(opt)
	m.player = p
	m.refresh()
	return m
}

func newModel(opt Options) *Model {
	if opt.Speed <= 0 {
		opt.Speed = 1
	}
	ti := textinput.New()
	ti.Prompt = "/"
	ti.CharLimit = 64
	return &Model{opt: opt, filter: ti, width: 80, height: 24}
}

func (m *Model) source() *Store {
	if m.player != nil {
		return m.player.Store()
	}
	return m.store
}

// refresh takes a new frame, and reruns the spike analysis when a window
// has closed since the last one (ticks come four times a window).
func (m *Model) refresh() {
	m.frame = m.source().Frame()
	win := m.frame.win
	last := uint64(0)
	if len(win) > 0 {
		last = win[len(win)-1].Index + 1
	}
	if m.corrKey == [2]uint64{uint64(len(win)), last} && m.corrDone {
		return
	}
	m.corrKey, m.corrDone = [2]uint64{uint64(len(win)), last}, true
	m.corr = nil
	var lats []latency.Stats
	for _, w := range win {
		if w.Latency != nil {
			lats = append(lats, *w.Latency)
		}
	}
	if len(lats) > 0 {
		info := m.frame.Info
		cfg := correlate.Config{K: info.SpikeK, FloorNs: info.SpikeFloorNs, StartNs: info.StartNs}
		if !info.Started.IsZero() {
			cfg.WallAt = func(mono uint64) time.Time { return info.Started.Add(time.Duration(mono - info.StartNs)) }
		}
		m.corr = correlate.Analyze(lats, win, cfg)
	}
}

func tick() tea.Cmd {
	return tea.Tick(Tick, func(t time.Time) tea.Msg { return TickMsg(t) })
}

// Init starts the tick.
func (m *Model) Init() tea.Cmd {
	if m.opt.NoTicks {
		return nil
	}
	return tea.Batch(tick(), m.readProcfs())
}

// Update handles keys, resizes and ticks.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case TickMsg:
		m.onTick()
		if m.opt.NoTicks {
			return m, nil
		}
		return m, tick()
	case tea.KeyMsg:
		return m, m.onKey(msg)
	case EndedMsg:
		m.ended = msg.Why
		m.refresh()
		return m, nil
	case procfsMsg:
		m.procErr = msg.err
		if msg.err == nil {
			m.store.Procfs(msg.p)
		}
		return m, m.readProcfs()
	}
	return m, nil
}

func (m *Model) onTick() {
	if m.player != nil {
		if !m.playing {
			return
		}
		// Advance by the recording time one tick covers at this speed.
		win := float64(m.frame.Info.WindowNs)
		if win == 0 {
			win = float64(time.Second)
		}
		m.carry += float64(Tick) * m.opt.Speed / win
		step := int(m.carry)
		m.carry -= float64(step)
		if step > 0 {
			m.player.Seek(m.player.Pos() + step)
			m.refresh()
		}
		if m.player.Pos() >= m.player.Len() {
			m.playing = false
		}
		return
	}
	if !m.paused {
		m.refresh()
	}
}

func (m *Model) onKey(k tea.KeyMsg) tea.Cmd {
	if m.filtering {
		switch k.String() {
		case "enter", "esc":
			m.filtering = false
			m.filter.Blur()
			if k.String() == "esc" {
				m.filter.SetValue("")
			}
			m.selected = 0
			return nil
		}
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(k)
		m.selected = 0
		return cmd
	}
	if m.help {
		if k.String() == "q" || k.String() == "ctrl+c" {
			return tea.Quit
		}
		m.help = false
		return nil
	}
	switch k.String() {
	case "q", "ctrl+c":
		return tea.Quit
	case "?":
		m.help = true
	case "tab":
		if m.screen == screenThread {
			m.screen = m.prev
		}
		m.screen = (m.screen + 1) % numScreens
		m.selected, m.scroll = 0, 0
	case "shift+tab":
		if m.screen == screenThread {
			m.screen = m.prev
		}
		m.screen = (m.screen + numScreens - 1) % numScreens
		m.selected, m.scroll = 0, 0
	case "up", "k":
		m.move(-1)
	case "down", "j":
		m.move(1)
	case "pgup":
		m.move(-10)
	case "pgdown":
		m.move(10)
	case "enter":
		m.enter()
	case "esc":
		switch {
		case m.screen == screenThread:
			m.screen, m.scroll = m.prev, 0
		case m.focus != nil:
			m.focus, m.selected = nil, 0
		case m.filter.Value() != "":
			m.filter.SetValue("")
		}
	case "s":
		m.sortKey = (m.sortKey + 1) % numSortKeys
		m.selected = 0
	case "S":
		m.sortKey = (m.sortKey + numSortKeys - 1) % numSortKeys
		m.selected = 0
	case "g":
		m.byProcess = !m.byProcess
		m.selected = 0
	case "/":
		if m.screen == screenOverview {
			m.filtering = true
			return m.filter.Focus()
		}
	case "p":
		if m.player == nil {
			m.paused = !m.paused
			if !m.paused {
				m.refresh()
			}
		}
	case " ":
		if m.player != nil {
			if !m.playing && m.player.Pos() >= m.player.Len() {
				m.player.Seek(0)
			}
			m.playing = !m.playing
			m.carry = 0
			m.refresh()
		}
	case "left", "right", "shift+left", "shift+right", "home", "end":
		if m.player != nil {
			m.seek(k.String())
		}
	}
	return nil
}

func (m *Model) seek(key string) {
	pos := m.player.Pos()
	switch key {
	case "left":
		pos--
	case "right":
		pos++
	case "shift+left":
		pos -= 10
	case "shift+right":
		pos += 10
	case "home":
		pos = 0
	case "end":
		pos = m.player.Len()
	}
	m.player.Seek(pos)
	m.refresh()
}

func (m *Model) move(d int) {
	if m.screen == screenThread || m.screen == screenSystem {
		m.scroll = max(0, m.scroll+d)
		return
	}
	n := 0
	switch m.screen {
	case screenOverview:
		n = len(m.rows())
	case screenSpikes:
		if m.corr != nil {
			n = len(m.corr.Spikes)
		}
	}
	m.selected = min(max(0, m.selected+d), max(0, n-1))
}

func (m *Model) enter() {
	switch m.screen {
	case screenOverview:
		rows := m.rows()
		if m.selected < len(rows) && !m.byProcess {
			m.detailTID = rows[m.selected].TID
			m.prev, m.screen, m.scroll = m.screen, screenThread, 0
		} else if m.selected < len(rows) {
			// A process row: show its threads.
			m.byProcess = false
			m.filter.SetValue(itoa(rows[m.selected].PID))
			m.selected = 0
		}
	case screenSpikes:
		if m.corr != nil && m.selected < len(m.corr.Spikes) {
			idx := m.corr.Spikes[m.selected].Index
			m.focus = &idx
			m.screen, m.selected = screenOverview, 0
		}
	}
}

// rows is the overview table as shown: focused, grouped, filtered, sorted.
func (m *Model) rows() []Row {
	rows := m.frame.Rows
	if m.focus != nil {
		rows = windowRows(m.frame, *m.focus)
	}
	if m.byProcess {
		rows = Processes(rows)
	}
	rows = FilterRows(rows, m.filter.Value())
	out := append([]Row(nil), rows...)
	SortRows(out, m.sortKey)
	return out
}

// windowRows are the threads that stalled in window idx.
func windowRows(f *Frame, idx uint64) []Row {
	var out []Row
	for _, w := range f.win {
		if w.Index != idx {
			continue
		}
		nodeOf := map[uint32]int{}
		for _, r := range f.Rows {
			nodeOf[r.TID] = r.Node
		}
		for _, t := range w.Threads {
			out = append(out, Row{PID: t.PID, TID: t.TID, Comm: t.Comm, Node: nodeOf[t.TID], Threads: 1,
				StallNs: t.TotalNs, ByCause: t.ByCause})
		}
	}
	return out
}
