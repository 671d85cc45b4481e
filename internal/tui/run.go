package tui

import (
	"io"
	"os"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"
	"github.com/muesli/termenv"

	"github.com/numatrace/numatrace/internal/record"
)

// EndedMsg tells a live view that tracing stopped before its --duration
// (the target exited, an error); the view stays until the user quits.
type EndedMsg struct{ Why string }

// procfsMsg carries a /proc reading into the live view.
type procfsMsg struct {
	p   record.Procfs
	err error
}

// ProcfsEvery is how often the live view reads /proc for the System
// screen.
const ProcfsEvery = time.Second

func (m *Model) readProcfs() tea.Cmd {
	if m.opt.ReadProcfs == nil || m.opt.NoTicks {
		return nil
	}
	read := m.opt.ReadProcfs
	return tea.Tick(ProcfsEvery, func(time.Time) tea.Msg {
		p, err := read()
		return procfsMsg{p, err}
	})
}

// HonourNoColor turns colour off when NO_COLOR is set (any value), as
// https://no-color.org asks.
func HonourNoColor() {
	if os.Getenv("NO_COLOR") != "" {
		lipgloss.SetColorProfile(termenv.Ascii)
	}
}

// OnTerminal reports whether w and standard input are terminals: only
// then is the interactive view the default.
func OnTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd()) && term.IsTerminal(os.Stdin.Fd())
}

// Program makes the Bubble Tea program for m on the terminal in/out.
func Program(m *Model, in io.Reader, out io.Writer) *tea.Program {
	HonourNoColor()
	return tea.NewProgram(m, tea.WithAltScreen(), tea.WithInput(in), tea.WithOutput(out))
}
