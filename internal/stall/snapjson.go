package stall

import (
	"encoding/json"

	"github.com/numatrace/numatrace/internal/jsonfast"
)

// Snapshots, threads and histograms decode through jsonfast when they
// look as numatrace writes them: replay reads a recording's final
// snapshot, one histogram per thread and cause, and encoding/json's
// reflection made that a fifth of a replay's time. Anything else
// (unknown, repeated or differently cased keys, escapes, non-ASCII,
// numbers that are not plain unsigned integers, null, a value decoded
// over) goes to encoding/json, so results and errors are always its own.

// UnmarshalJSON reads a histogram.
func (h *Hist) UnmarshalJSON(b []byte) error {
	if *h == (Hist{}) {
		p := jsonfast.New(b)
		if v, ok := readHist(p); ok && p.End() {
			*h = v
			return nil
		}
	}
	type plain Hist // without this method
	return json.Unmarshal(b, (*plain)(h))
}

// UnmarshalJSON reads one thread's statistics.
func (t *ThreadStats) UnmarshalJSON(b []byte) error {
	if t.PID == 0 && t.TID == 0 && t.Comm == "" && t.Hists == nil && t.Migrations == 0 && t.CrossNodeMigrations == 0 {
		p := jsonfast.New(b)
		if v, ok := readThread(p); ok && p.End() {
			*t = *v
			return nil
		}
	}
	type plain ThreadStats // without this method
	return json.Unmarshal(b, (*plain)(t))
}

// once reports whether key is seen for the first time, by its bit.
func once(seen *uint32, bit uint) bool {
	if *seen&(1<<bit) != 0 {
		return false
	}
	*seen |= 1 << bit
	return true
}

func readHist(p *jsonfast.Parser) (h Hist, ok bool) {
	var seen uint32
	ok = p.Object(func(key string) (ok bool) {
		switch key {
		case "Count":
			h.Count, ok = p.Uint(64)
			return ok && once(&seen, 0)
		case "TotalNs":
			h.TotalNs, ok = p.Uint(64)
			return ok && once(&seen, 1)
		case "MaxNs":
			h.MaxNs, ok = p.Uint(64)
			return ok && once(&seen, 2)
		case "NestedNs":
			h.NestedNs, ok = p.Uint(64)
			return ok && once(&seen, 3)
		case "Slots":
			// Fewer values than slots leave the rest zero, as in
			// encoding/json; more are left to it.
			return once(&seen, 4) && p.Array(func(i int) (ok bool) {
				if i < HistSlots {
					h.Slots[i], ok = p.Uint(64)
				}
				return ok
			})
		}
		return false
	})
	return h, ok
}

func readThread(p *jsonfast.Parser) (*ThreadStats, bool) {
	t := &ThreadStats{}
	var seen uint32
	ok := p.Object(func(key string) (ok bool) {
		var v uint64
		switch key {
		case "PID":
			v, ok = p.Uint(32)
			t.PID = uint32(v)
			return ok && once(&seen, 0)
		case "TID":
			v, ok = p.Uint(32)
			t.TID = uint32(v)
			return ok && once(&seen, 1)
		case "Comm":
			t.Comm, ok = p.Str()
			return ok && once(&seen, 2)
		case "Migrations":
			t.Migrations, ok = p.Uint(64)
			return ok && once(&seen, 3)
		case "CrossNodeMigrations":
			t.CrossNodeMigrations, ok = p.Uint(64)
			return ok && once(&seen, 4)
		case "Hists":
			t.Hists = map[Cause]*Hist{}
			return once(&seen, 5) && p.UintObject(8, func(c uint64) bool {
				h, ok := readHist(p)
				t.Hists[Cause(c)] = &h // a key given twice: the last, as in encoding/json
				return ok
			})
		}
		return false
	})
	return t, ok
}

// ReadSnapshot reads a snapshot as numatrace writes it from p, or says
// it is not in that shape: decode it with encoding/json then.
func ReadSnapshot(p *jsonfast.Parser) (*Snapshot, bool) {
	s := &Snapshot{}
	var seen uint32
	// The small fields go to encoding/json, one by one.
	small := func(bit uint, v any) bool {
		raw, ok := p.Raw()
		return ok && once(&seen, bit) && json.Unmarshal(raw, v) == nil
	}
	ok := p.Object(func(key string) bool {
		switch key {
		case "Threads":
			s.Threads = map[uint32]*ThreadStats{}
			return once(&seen, 0) && p.UintObject(32, func(tid uint64) bool {
				t, ok := readThread(p)
				s.Threads[uint32(tid)] = t
				return ok
			})
		case "System":
			return small(1, &s.System)
		case "LostEvents":
			return small(2, &s.LostEvents)
		case "LostPerCPU":
			return small(3, &s.LostPerCPU)
		case "HistEntries":
			return small(4, &s.HistEntries)
		case "HistCapacity":
			return small(5, &s.HistCapacity)
		}
		return false
	})
	return s, ok
}
