package window

import "testing"

// A time falls in the window that holds it; one before the start folds
// into the first window, as a stall stamped at its end just before the
// run began belongs to the run.
func TestIndex(t *testing.T) {
	g := Grid{StartNs: 1000, LenNs: 100}
	for _, c := range []struct{ ts, want uint64 }{{1000, 0}, {1099, 0}, {1100, 1}, {1350, 3}, {999, 0}, {0, 0}} {
		if got := g.Index(c.ts); got != c.want {
			t.Errorf("Index(%d) = %d, want %d", c.ts, got, c.want)
		}
	}
	if g.Start(3) != 1300 || g.End(3) != 1400 {
		t.Errorf("window 3 is [%d, %d)", g.Start(3), g.End(3))
	}
	if (Grid{StartNs: 5}).Index(1e9) != 0 {
		t.Error("a grid without a length must not divide by zero")
	}
}
