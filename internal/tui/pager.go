package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/viewport"
)

// pager scrolls a screen taller than the terminal, with bubbles'
// viewport keeping the offset in range; the screen draws the lines.
type pager struct{ vp viewport.Model }

// newPager fits a page under the header and tabs, above the status line.
func newPager(height int) pager { return pager{vp: viewport.New(0, max(1, height-3))} }

func (p *pager) setHeight(height int) { p.vp.Height = max(1, height-3) }

func (p *pager) scroll(d int) {
	if d > 0 {
		p.vp.ScrollDown(d)
	} else {
		p.vp.ScrollUp(-d)
	}
}

func (p *pager) top() { p.vp.GotoTop() }

// show takes the page's lines and returns them from the scroll offset on.
func (p *pager) show(lines []string) []string {
	p.vp.SetContent(strings.Join(lines, "\n"))
	p.vp.SetYOffset(p.vp.YOffset)
	return lines[p.vp.YOffset:]
}
