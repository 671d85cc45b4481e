package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/numatrace/numatrace/internal/correlate"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
)

// Tick is how often the screen takes a new frame: live data is batched
// onto it.
const Tick = 250 * time.Millisecond

// warningShown is how long a new warning takes the status line; the
// System screen keeps the latest ones.
const warningShown = 10 * time.Second

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

// shared is what every screen reads: the frame on show, the terminal's
// size and the options; and how a screen sends the user to another.
type shared struct {
	opt    Options
	frame  *Frame
	width  int
	height int
	player *Player // replay; nil when live
	store  *Store  // live
	// wallClock shows times as wall clock, not as offsets from the start.
	wallClock bool

	showThread  func(tid uint32)
	focusWindow func(idx uint64)
}

func (s *shared) source() *Store {
	if s.player != nil {
		return s.player.Store()
	}
	return s.store
}

// analysis is the engine's spike analysis as of the frame: nil without a
// latency source.
func (s *shared) analysis() *correlate.Result { return s.frame.Analysis }

// spikeAnalysis is what the Spikes screen lists: live, the analysis as
// of the frame; in a replay, the whole recording's, wherever the replay
// stands (at its start, after home, the analysis so far has no samples).
func (s *shared) spikeAnalysis() *correlate.Result {
	if s.player != nil {
		return s.player.Analysis()
	}
	return s.analysis()
}

// windowClock names a window by its start, as clockAt shows times.
func (s *shared) windowClock(idx uint64) string {
	return s.clockAt(s.frame.Info.Run.Windows().Start(idx))
}

// clockAt shows a time on the run's clock: its offset from the start
// (+6.5s), or with wallClock the wall clock in UTC to the millisecond
// (03:34:53.512 UTC) when the run's start is known.
func (s *shared) clockAt(mono uint64) string {
	d := s.frame.Info.Run
	if t, ok := d.WallAt(mono); ok && s.wallClock {
		return run.Clock(t)
	}
	return "+" + time.Duration(mono-min(mono, d.StartNs)).Round(time.Millisecond).String()
}

// hasWallClock says whether the run's wall clock start is known.
func (s *shared) hasWallClock() bool { return !s.frame.Info.Run.Started.IsZero() }

// Model is the root of the view: header, tabs, status line and global
// keys; the screens do the rest.
type Model struct {
	*shared
	screens []screen // screenDefs', in order
	// over and thread are also in screens: the root sends the user to
	// them (a spike's window, a thread's drill-down).
	over   *overviewScreen
	thread *threadScreen
	helpM  help.Model

	screen screen // on show
	prev   screen // the one the drill-down was entered from
	help   bool

	paused  bool // live: the frame is frozen
	playing bool // replay
	carry   float64
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
	sh := &shared{opt: opt, width: 80, height: 24}
	m := &Model{shared: sh, helpM: helpModel()}
	for _, d := range screenDefs {
		m.screens = append(m.screens, d.new(m))
	}
	m.screen = m.over
	sh.showThread = func(tid uint32) {
		m.thread.tid = tid
		m.prev, m.screen = m.screen, m.thread
		m.thread.reset()
	}
	m.thread.close = func() {
		m.screen = m.prev
		m.thread.reset()
	}
	sh.focusWindow = func(idx uint64) {
		if m.player != nil && m.player.ShowWindow(idx) {
			m.refresh()
		}
		m.over.focusOn(idx)
		m.screen = m.over
	}
	return m
}

// active is the screen on show.
func (m *Model) active() screen { return m.screen }

// rows is the overview table as shown.
func (m *Model) rows() []Row { return m.over.rows() }

// refresh takes a new frame from the live store or the replay's position.
func (m *Model) refresh() { m.frame = m.source().Frame() }

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
		for _, s := range m.screens {
			s.SetSize(msg.Width, msg.Height)
		}
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
	if m.player == nil {
		if !m.paused {
			m.refresh()
		}
		return
	}
	if !m.playing {
		return
	}
	// Advance by the recording time one tick covers at this speed.
	win := float64(m.frame.Info.Run.WindowNs)
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
}

// onKey takes the global keys and hands the rest to the screen on show.
func (m *Model) onKey(k tea.KeyMsg) tea.Cmd {
	if m.screen == m.over && m.over.filtering {
		return m.over.Update(k) // the filter takes every key
	}
	if m.help {
		m.help = false
		if key.Matches(k, global.Quit) {
			return tea.Quit
		}
		return nil
	}
	switch {
	case key.Matches(k, global.Quit):
		return tea.Quit
	case key.Matches(k, global.Help):
		m.help = true
	case key.Matches(k, global.Next), key.Matches(k, global.Prev):
		m.cycle(key.Matches(k, global.Next))
	case m.player == nil && key.Matches(k, global.Pause):
		m.paused = !m.paused
		if !m.paused {
			m.refresh()
		}
	case m.player != nil && key.Matches(k, global.Play):
		m.playPause()
	case m.player != nil && m.seek(k):
	default:
		return m.active().Update(k)
	}
	return nil
}

func (m *Model) playPause() {
	if !m.playing && m.player.Pos() >= m.player.Len() {
		m.player.Seek(0)
	}
	m.playing = !m.playing
	m.carry = 0
	m.refresh()
}

// seek moves a replay for its keys, and says whether k was one.
func (m *Model) seek(k tea.KeyMsg) bool {
	pos := m.player.Pos()
	switch {
	case key.Matches(k, global.Back):
		pos--
	case key.Matches(k, global.On):
		pos++
	case key.Matches(k, global.BackTen):
		pos -= 10
	case key.Matches(k, global.OnTen):
		pos += 10
	case key.Matches(k, global.Start):
		pos = 0
	case key.Matches(k, global.End):
		pos = m.player.Len()
	default:
		return false
	}
	m.player.Seek(pos)
	m.refresh()
	return true
}

// View renders the current screen. Every screen fits its lines to the
// width itself; the cut here only guards the terminal.
func (m *Model) View() string {
	if m.width < 20 || m.height < 5 {
		return "numatrace: terminal too small"
	}
	lines := m.lines()
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, m.width, "…")
	}
	return strings.Join(lines, "\n")
}

// lines are the screen's lines, the terminal's height of them, as the
// screens made them.
func (m *Model) lines() []string {
	body := m.active().View()
	if m.help {
		body = m.helpView()
	}
	lines := append([]string{m.header(), m.tabs()}, body...)
	status := m.status()
	if len(lines) > m.height-1 {
		lines = lines[:m.height-1]
	}
	for len(lines) < m.height-1 {
		lines = append(lines, "")
	}
	return append(lines, status)
}

func (m *Model) elapsedNs() uint64 {
	f := m.frame
	if m.player != nil {
		return uint64(m.player.Pos()) * f.Info.Run.WindowNs
	}
	if m.ended != "" && f.NowNs > f.Info.Run.StartNs {
		return f.NowNs - f.Info.Run.StartNs
	}
	if m.opt.Now != nil {
		if now := m.opt.Now(); now > f.Info.Run.StartNs {
			return now - f.Info.Run.StartNs
		}
	}
	return 0
}

// clock formats an elapsed time as m:ss, or h:mm:ss from an hour on.
func clock(ns uint64) string {
	d := time.Duration(ns).Truncate(time.Second)
	if d >= time.Hour {
		return fmt.Sprintf("%d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

func (m *Model) header() string {
	f := m.frame
	d, in := f.Info.Run, f.Info
	mode := "LIVE"
	switch {
	case m.player != nil:
		state := "⏸"
		if m.playing {
			state = fmt.Sprintf("▶ ×%g", m.opt.Speed)
		}
		mode = fmt.Sprintf("REPLAY %s/%s %s", clock(m.elapsedNs()), clock(uint64(m.player.Len())*d.WindowNs), state)
	case m.ended != "":
		mode = "STOPPED: " + sanitize.Text(m.ended)
	case m.paused:
		mode = "LIVE (paused)"
	}
	lost := fmt.Sprintf("lost %d", f.Lost)
	if f.Lost > 0 {
		lost = styleWarn.Render(lost)
	}
	if f.Evicted > 0 {
		lost += " " + styleWarn.Render(fmt.Sprintf("evicted %d", f.Evicted))
	}
	nodes := fmt.Sprintf("%d nodes", in.Machine.Nodes)
	if in.Machine.Nodes == 1 {
		nodes = "1 node"
	}
	elapsed := clock(m.elapsedNs())
	if m.player != nil {
		elapsed = ""
	}
	lostDrop := 0 // events lost are news: kept as the target is
	if f.Lost == 0 && f.Evicted == 0 {
		lostDrop = 4
	}
	// What matters most comes first. A narrow terminal drops the kernel,
	// the node count, the probes, a zero of lost events and the elapsed
	// time, in that order; never the target.
	parts := []headerPart{{styleTitle.Render("numatrace") + " " + mode, shrinks}, {elapsed, 5}, {lost, lostDrop},
		{fmt.Sprintf("probes %d/%d", stall.Attached(d.Probes), stall.Asked(d.Probes)), 3}, {nodes, 2},
		{sanitize.Text(d.Target), 0}, {sanitize.Text(d.Kernel), 1}}
	return fitParts(parts, " │ ", m.width)
}

// headerPart is a part of a line that a narrow terminal drops: the one
// with the lowest drop first, 0 never. The part that shrinks is
// shortened when dropping the others was not enough (a long reason the
// live run stopped), so those after it stay whole.
type headerPart struct {
	text string
	drop int
}

const shrinks = -1

// fitParts joins the parts with sep, dropping parts until the line fits
// in width, then shortening the one that shrinks.
func fitParts(parts []headerPart, sep string, width int) string {
	for drop := 0; ; drop++ {
		var keep []headerPart
		more := false
		for _, p := range parts {
			if p.text != "" && (p.drop <= 0 || p.drop > drop) {
				keep = append(keep, p)
				more = more || p.drop > drop
			}
		}
		line := joinParts(keep, sep)
		if over := ansi.StringWidth(line) - width; over <= 0 || !more {
			return shrink(keep, sep, over)
		}
	}
}

func joinParts(parts []headerPart, sep string) string {
	var texts []string
	for _, p := range parts {
		texts = append(texts, p.text)
	}
	return strings.Join(texts, sep)
}

// shrink shortens the part that shrinks by over cells, if over > 0.
func shrink(parts []headerPart, sep string, over int) string {
	for i, p := range parts {
		if over > 0 && p.drop == shrinks {
			parts[i].text = ansi.Truncate(p.text, max(1, ansi.StringWidth(p.text)-over), "…")
		}
	}
	return joinParts(parts, sep)
}

func (m *Model) tabs() string {
	var b []string
	for i, d := range screenDefs {
		switch {
		case d.tab == "":
		case m.screens[i] == m.tabOf():
			b = append(b, styleTab.Render(" "+d.tab+" "))
		default:
			b = append(b, " "+d.tab+" ")
		}
	}
	s := strings.Join(b, "")
	if m.screen == m.thread {
		s += " › thread " + itoa(m.thread.tid)
	}
	return s
}

func (m *Model) status() string {
	if m.screen == m.over && m.over.filtering {
		return m.over.filter.View()
	}
	if w := m.frame.Warnings; len(w) > 0 && time.Since(w[len(w)-1].At) < warningShown {
		return m.warningStatus(w[len(w)-1])
	}
	return styleDim.Render(m.keyHints())
}

// warningStatus shows a new warning beside the help and quit keys. What
// of it does not fit is on the System screen, which keeps it whole.
func (m *Model) warningStatus(w Warning) string {
	keys := "  " + hints(global.Help, global.Quit)
	room := max(0, m.width-ansi.StringWidth(keys))
	msg := ansi.Truncate("warning: "+sanitize.Text(w.Msg), room, "…")
	return styleWarn.Render(msg) + styleDim.Render(keys)
}

// keyHints are the screen's state and keys, then the global keys. A
// narrow terminal drops seeking, tab, play or pause, then the screen's
// hints, the first first; never help and quit.
func (m *Model) keyHints() string {
	var parts []headerPart
	for i, h := range m.active().Hints() {
		parts = append(parts, headerPart{h, 4 + i})
	}
	if m.player != nil {
		parts = append(parts, headerPart{hints(global.Play), 3}, headerPart{hints(global.Back), 1})
	} else {
		parts = append(parts, headerPart{hints(global.Pause), 3})
	}
	parts = append(parts, headerPart{hints(global.Next), 2}, headerPart{hints(global.Help), 0}, headerPart{hints(global.Quit), 0})
	if line := fitParts(parts, " · ", m.width); ansi.StringWidth(line) <= m.width && len(line) > 0 && !dropped(parts, line) {
		return line
	}
	return fitParts(parts, "  ", m.width)
}

// dropped says whether fitParts left a part out of line.
func dropped(parts []headerPart, line string) bool {
	for _, p := range parts {
		if p.text != "" && !strings.Contains(line, p.text) {
			return true
		}
	}
	return false
}

func (m *Model) helpView() []string {
	lines := []string{"", styleHead.Render("KEYS")}
	lines = append(lines, fullHelp(m.helpM, helpKeys{m.screens})...)
	return append(lines, "", styleDim.Render("any key closes this help"))
}
