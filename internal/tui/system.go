package tui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/numatrace/numatrace/internal/sanitize"
)

// systemScreen shows the kernel's own counters over the run, memory per
// node, and doctor's findings.
type systemScreen struct {
	*shared
	page    pager
	procErr *error // the live view's last /proc reading error
}

func newSystem(sh *shared, procErr *error) *systemScreen {
	return &systemScreen{shared: sh, page: newPager(sh.height), procErr: procErr}
}

func (s *systemScreen) SetSize(_, height int) { s.page.setHeight(height) }

func (s *systemScreen) reset() { s.page.top() }

func (s *systemScreen) Help() []key.Binding { return nil }

func (s *systemScreen) Hints() []string { return nil }

func (s *systemScreen) Update(k tea.KeyMsg) tea.Cmd {
	if d, ok := list.move(k); ok {
		s.page.scroll(d)
	}
	return nil
}

// vmstatKeys are the counters the System screen shows as deltas.
var vmstatKeys = []string{"allocstall", "compact_stall", "pgscan_direct", "numa_hit", "numa_miss", "numa_foreign",
	"numa_pages_migrated", "zone_reclaim_failed"}

func vmDelta(first, last map[string]int64, key string) (int64, bool) {
	if key == "allocstall" { // one counter per zone type
		var d int64
		found := false
		for k, v := range last {
			if strings.HasPrefix(k, "allocstall_") {
				d += v - first[k]
				found = true
			}
		}
		return d, found
	}
	v, ok := last[key]
	return v - first[key], ok
}

func (s *systemScreen) View() []string {
	f := s.frame
	lines := []string{}
	if *s.procErr != nil {
		lines = append(lines, styleWarn.Render("reading /proc: "+sanitize.Text((*s.procErr).Error())))
	}
	for _, w := range f.Warnings {
		for _, l := range hangWrap(w.At.Format("15:04:05")+" "+sanitize.Text(w.Msg), s.width, "         ") {
			lines = append(lines, styleWarn.Render(l))
		}
	}
	if f.Last == nil {
		lines = append(lines, styleDim.Render("no /proc readings yet"))
	} else {
		lines = append(lines, s.counters()...)
	}
	if sys := f.System; sys.StacksTaken > 0 || sys.KernelStacksLost > 0 || sys.UserStacksLost > 0 {
		lines = append(lines, "", styleHead.Render("STACKS"),
			fmt.Sprintf("  %d stalls took their stacks; not taken: %d kernel, %d user", sys.StacksTaken, sys.KernelStacksLost, sys.UserStacksLost))
	}
	lines = append(lines, "", styleHead.Render("DOCTOR"))
	var findings []string
	if f.Info.Doctor != nil {
		findings = f.Info.Doctor.Lines()
	}
	if len(findings) == 0 {
		for _, l := range wrap(s.noFindings(), s.width-2) {
			lines = append(lines, styleDim.Render("  "+l))
		}
	}
	for _, fd := range findings {
		for _, l := range wrap(sanitize.Text(fd), s.width-2) {
			lines = append(lines, "  "+l)
		}
	}
	return s.page.show(lines)
}

// counters are the vmstat deltas and memory per node.
func (s *systemScreen) counters() []string {
	f := s.frame
	span := time.Duration(f.Last.MonoNs - f.First.MonoNs).Round(time.Second)
	lines := []string{styleHead.Render("VMSTAT") + styleDim.Render(" (change over "+span.String()+")")}
	for _, k := range vmstatKeys {
		d, ok := vmDelta(f.First.Vmstat, f.Last.Vmstat, k)
		val := fmt.Sprint(d)
		if !ok {
			val = "n/a"
		}
		lines = append(lines, fmt.Sprintf("  %-22s %12s", k, val))
	}
	lines = append(lines, "", styleHead.Render("MEMORY PER NODE"))
	lines = append(lines, fmt.Sprintf("  %-6s %10s %10s %10s  %s", "NODE", "TOTAL", "USED", "FREE", "USED"))
	var names []string
	for n := range f.Last.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		mi := f.Last.Nodes[n]
		tot, free := mi["MemTotal"], mi["MemFree"]
		used := tot - free
		lines = append(lines, fmt.Sprintf("  %-6s %10s %10s %10s  %s", n, kib(tot), kib(used), kib(free),
			bar(uint64(max(used, 0)), uint64(max(tot, 1)), max(5, s.width-50))))
	}
	return lines
}

// kib formats a meminfo value (kB) in MiB or GiB.
func kib(v int64) string {
	mib := float64(max(v, 0)) / 1024
	if mib >= 10240 {
		return fmt.Sprintf("%.1fGiB", mib/1024)
	}
	return fmt.Sprintf("%.0fMiB", mib)
}

// noFindings says why there are no doctor findings. A replay's are the
// recorded machine's: running doctor here would check this one.
func (s *systemScreen) noFindings() string {
	switch {
	case s.frame.Info.Doctor != nil && s.player != nil:
		return "doctor found nothing on the recorded machine"
	case s.frame.Info.Doctor != nil:
		return "doctor found nothing"
	case s.player != nil:
		return "this recording has no doctor findings (it was made without them)"
	}
	return "no findings (run `numatrace doctor`)"
}
