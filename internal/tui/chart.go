package tui

import (
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/stall"
)

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

var sparkRunes = []rune(" ▁▂▃▄▅▆▇█")

// sparkline draws v scaled to its maximum, one cell per value.
func sparkline(v []uint64) string {
	var top uint64
	for _, x := range v {
		top = max(top, x)
	}
	var b strings.Builder
	for _, x := range v {
		if top == 0 || x == 0 {
			b.WriteRune(' ')
			continue
		}
		i := 1 + int(float64(x)/float64(top)*float64(len(sparkRunes)-2)+0.5)
		b.WriteRune(sparkRunes[min(i, len(sparkRunes)-1)])
	}
	return b.String()
}

// stacked draws rows lines of per-window stall time, each column stacked
// by cause bottom up. It returns the cells as cause indexes (-1 empty),
// top row first, for the caller to colour.
func stacked(ws []WindowSummary, rows int) [][]int {
	var top uint64
	for _, w := range ws {
		top = max(top, total(w))
	}
	grid := make([][]int, rows)
	for r := range grid {
		grid[r] = make([]int, len(ws))
		for c := range grid[r] {
			grid[r][c] = -1
		}
	}
	if top == 0 {
		return grid
	}
	for x, w := range ws {
		t := total(w)
		if t == 0 {
			continue
		}
		cells := max(1, int(float64(t)/float64(top)*float64(rows)+0.5))
		// Give each cell to the cause that owns the most of its slice.
		var acc uint64
		cause := 0
		for cell := 0; cell < cells; cell++ {
			mid := uint64((float64(cell) + 0.5) / float64(cells) * float64(t))
			for acc+w.CauseNs[cause] <= mid && cause < int(stall.NumCauses)-1 {
				acc += w.CauseNs[cause]
				cause++
			}
			grid[rows-1-cell][x] = cause
		}
	}
	return grid
}

func total(w WindowSummary) uint64 {
	var t uint64
	for c, ns := range w.CauseNs {
		if stall.Cause(c).Timed() {
			t += ns
		}
	}
	return t
}

// bar is a horizontal bar of up to width cells for v out of top.
func bar(v, top uint64, width int) string {
	return strings.Repeat("█", output.BarCells(v, top, width))
}

// repeatBlock is a bar of n cells.
func repeatBlock(n int) string { return strings.Repeat("█", n) }
