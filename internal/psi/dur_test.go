package psi_test

import (
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/psi"
)

// psi's sentences format durations as the report does.
func TestDurIsOutputDur(t *testing.T) {
	for _, ns := range []uint64{0, 1, 999, 1_000, 16_400, 999_949, 999_950, 3_210_000, 999_994_999, 999_995_000, 1_500_000_000, 7_100_000_000} {
		if got, want := psi.Dur(time.Duration(ns)), output.Dur(ns); got != want {
			t.Errorf("dur(%d) = %q, output.Dur = %q", ns, got, want)
		}
	}
}
