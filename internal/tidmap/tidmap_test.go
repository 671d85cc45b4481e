package tidmap

import (
	"math/rand"
	"testing"
)

// TestMatchesGoMap drives a Map and a Go map with the same random puts,
// gets and resets, over tids dense, sparse and at the edges of uint32.
func TestMatchesGoMap(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var m Map[int]
	ref := map[uint32]int{}
	tid := func() uint32 {
		switch rng.Intn(4) {
		case 0:
			return uint32(rng.Intn(3000)) // a busy machine's tids, close together
		case 1:
			return rng.Uint32()
		case 2:
			return []uint32{0, 1, 1<<32 - 1, 1 << 31, 4194304}[rng.Intn(5)]
		}
		return uint32(rng.Intn(64)) << 16 // same low bits: collide in a weak hash
	}
	for round := 0; round < 200_000; round++ {
		switch k := tid(); rng.Intn(10) {
		case 0, 1, 2, 3:
			v, added := m.Put(k)
			_, had := ref[k]
			if added == had {
				t.Fatalf("Put(%d) added=%v, the map had it: %v", k, added, had)
			}
			*v = round
			ref[k] = round
		case 4, 5, 6, 7, 8:
			v := m.Get(k)
			want, had := ref[k]
			if (v != nil) != had || (had && *v != want) {
				t.Fatalf("Get(%d) = %v, want %d (present %v)", k, v, want, had)
			}
		default:
			if rng.Intn(5000) == 0 {
				m.Reset()
				clear(ref)
			}
		}
		if m.Len() != len(ref) {
			t.Fatalf("Len %d, want %d", m.Len(), len(ref))
		}
	}
	seen := 0
	m.All(func(k uint32, v *int) {
		seen++
		if want, ok := ref[k]; !ok || *v != want {
			t.Fatalf("All gave %d=%d, want %d (present %v)", k, *v, want, ok)
		}
	})
	if seen != len(ref) {
		t.Fatalf("All gave %d threads, want %d", seen, len(ref))
	}
}

func TestResetKeepsRoomAndEmpties(t *testing.T) {
	var m Map[string]
	for i := uint32(0); i < 1000; i++ {
		v, _ := m.Put(i)
		*v = "x"
	}
	room := len(m.slots)
	m.Reset()
	if m.Len() != 0 || m.Get(5) != nil || len(m.slots) != room {
		t.Fatalf("after Reset: len %d, Get(5) %v, room %d (was %d)", m.Len(), m.Get(5), len(m.slots), room)
	}
	if v, added := m.Put(5); !added || *v != "" {
		t.Fatalf("Put after Reset: added %v, value %q (a value from before the reset)", added, *v)
	}
}

func BenchmarkGet(b *testing.B) {
	var m Map[int]
	ref := map[uint32]int{}
	for i := uint32(1000); i < 3000; i++ {
		v, _ := m.Put(i)
		*v = int(i)
		ref[i] = int(i)
	}
	tids := make([]uint32, 4096)
	for i := range tids {
		tids[i] = 1000 + uint32(rand.Intn(2000))
	}
	b.Run("tidmap", func(b *testing.B) {
		s := 0
		for i := 0; i < b.N; i++ {
			s += *m.Get(tids[i&4095])
		}
		_ = s
	})
	b.Run("gomap", func(b *testing.B) {
		s := 0
		for i := 0; i < b.N; i++ {
			s += ref[tids[i&4095]]
		}
		_ = s
	})
}
