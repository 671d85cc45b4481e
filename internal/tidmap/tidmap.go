// Package tidmap maps thread ids to values for the paths that look up a
// thread once per event. Replay decodes and aggregates millions of events
// a second, and a Go map's hashing and probing was a third of that time;
// this open-addressing table is a multiply, a shift and usually one probe,
// with each key next to its value so that a lookup touches one cache line.
package tidmap

// Map is a hash map from thread ids to V. Pointers it returns are valid
// until the next Put or Reset. The zero Map is empty and ready to use.
type Map[V any] struct {
	slots []slot[V]
	n     int
	shift uint // 64 - log2(len(slots))
}

type slot[V any] struct {
	key uint64 // tid | used; 0 is an empty slot
	val V
}

const used = 1 << 32

func (m *Map[V]) home(tid uint32) int {
	// Fibonacci hashing: consecutive tids spread over the table.
	return int((uint64(tid) * 0x9E3779B97F4A7C15) >> m.shift)
}

// Get returns tid's value, or nil.
func (m *Map[V]) Get(tid uint32) *V {
	if m.n == 0 {
		return nil
	}
	k, mask := uint64(tid)|used, len(m.slots)-1
	for i := m.home(tid); ; i = (i + 1) & mask {
		s := &m.slots[i]
		switch s.key {
		case k:
			return &s.val
		case 0:
			return nil
		}
	}
}

// Put returns tid's value, adding a zero one if tid is new; added says so.
func (m *Map[V]) Put(tid uint32) (v *V, added bool) {
	if 2*(m.n+1) > len(m.slots) { // at most half full: short probes
		m.grow()
	}
	k, mask := uint64(tid)|used, len(m.slots)-1
	for i := m.home(tid); ; i = (i + 1) & mask {
		s := &m.slots[i]
		switch s.key {
		case k:
			return &s.val, false
		case 0:
			s.key = k
			m.n++
			return &s.val, true
		}
	}
}

func (m *Map[V]) grow() {
	old := m.slots
	size := max(64, 2*len(old))
	m.slots, m.n = make([]slot[V], size), 0
	m.shift = 64
	for s := size; s > 1; s >>= 1 {
		m.shift--
	}
	for i := range old {
		if old[i].key != 0 {
			v, _ := m.Put(uint32(old[i].key))
			*v = old[i].val
		}
	}
}

// Len is the number of threads in m.
func (m *Map[V]) Len() int { return m.n }

// Reset empties m and keeps its room.
func (m *Map[V]) Reset() {
	if m.n > 0 {
		clear(m.slots)
		m.n = 0
	}
}

// All calls f for every thread in m, in no set order.
func (m *Map[V]) All(f func(tid uint32, v *V)) {
	for i := range m.slots {
		if s := &m.slots[i]; s.key != 0 {
			f(uint32(s.key), &s.val)
		}
	}
}
