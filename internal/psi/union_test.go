package psi

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestUnion(t *testing.T) {
	for _, tc := range []struct {
		name string
		ivs  []Interval
		want time.Duration
	}{
		{"none", nil, 0},
		{"one", []Interval{{10, 25}}, 15},
		{"disjoint", []Interval{{0, 5}, {10, 20}}, 15},
		{"overlapping", []Interval{{0, 10}, {5, 15}}, 15},
		{"nested", []Interval{{0, 100}, {10, 20}, {30, 40}}, 100},
		{"nested first by start, longer later", []Interval{{0, 10}, {0, 30}, {5, 8}}, 30},
		{"adjacent", []Interval{{0, 10}, {10, 20}, {20, 25}}, 25},
		{"unsorted", []Interval{{50, 60}, {0, 10}, {55, 70}, {5, 12}}, 32},
		{"duplicates", []Interval{{3, 9}, {3, 9}, {3, 9}}, 6},
		{"empty and backwards ones count nothing", []Interval{{5, 5}, {9, 4}, {20, 21}}, 1},
		{"a chain each overlapping the next", []Interval{{0, 4}, {3, 7}, {6, 10}, {9, 13}}, 13},
		{"near the top of the clock", []Interval{{1<<63 - 10, 1<<63 + 10}, {1 << 63, 1<<63 + 20}}, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.ivs)
			if got := Union(tc.ivs); got != tc.want {
				t.Errorf("Union(%v) = %d, want %d", tc.ivs, got, tc.want)
			}
			if !slices.Equal(in, tc.ivs) {
				t.Errorf("Union reordered its argument: %v, was %v", tc.ivs, in)
			}
		})
	}
}

// Union against counting covered nanoseconds one by one.
func TestUnionMatchesCounting(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		ivs := make([]Interval, r.IntN(12))
		var covered [210]bool // starts below 180, lengths below 30
		for i := range ivs {
			s := uint64(r.IntN(180))
			ivs[i] = Interval{s, s + uint64(r.IntN(30))}
			for ns := ivs[i].Start; ns < ivs[i].End; ns++ {
				covered[ns] = true
			}
		}
		var want time.Duration
		for _, c := range covered {
			if c {
				want++
			}
		}
		if got := Union(ivs); got != want {
			t.Fatalf("Union(%v) = %d, counting gives %d", ivs, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	ivs := []Interval{{0, 10}, {15, 25}, {30, 40}, {45, 50}, {95, 120}, {5, 200}}
	got := Clip(ivs, 20, 100)
	want := []Interval{{20, 25}, {30, 40}, {45, 50}, {95, 100}, {20, 100}}
	if !slices.Equal(got, want) {
		t.Errorf("Clip = %v, want %v", got, want)
	}
	if u := Union(got); u != 80 {
		t.Errorf("Union of the clipped = %d, want 80 (all of [20, 100])", u)
	}
	if got := Clip(ivs[:5], 10, 15); len(got) != 0 { // all but {5, 200}, which spans the gap
		t.Errorf("Clip to a gap = %v, want nothing (touching ends are empty)", got)
	}
	if got := Clip(ivs, 50, 20); len(got) != 0 {
		t.Errorf("Clip to a backwards window = %v, want nothing", got)
	}
}
