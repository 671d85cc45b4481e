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

func readHist(p *jsonfast.Parser) (h Hist, ok bool) {
	ok = p.Object(func(key string) (ok bool) {
		switch key {
		case "Count":
			h.Count, ok = p.Uint(64)
			return ok
		case "TotalNs":
			h.TotalNs, ok = p.Uint(64)
			return ok
		case "MaxNs":
			h.MaxNs, ok = p.Uint(64)
			return ok
		case "NestedNs":
			h.NestedNs, ok = p.Uint(64)
			return ok
		case "Slots":
			// Fewer values than slots leave the rest zero, as in
			// encoding/json; more are left to it.
			return p.Array(func(i int) (ok bool) {
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
	ok := p.Object(func(key string) (ok bool) {
		var v uint64
		switch key {
		case "PID":
			v, ok = p.Uint(32)
			t.PID = uint32(v)
			return ok
		case "TID":
			v, ok = p.Uint(32)
			t.TID = uint32(v)
			return ok
		case "Comm":
			t.Comm, ok = p.Str()
			return ok
		case "Migrations":
			t.Migrations, ok = p.Uint(64)
			return ok
		case "CrossNodeMigrations":
			t.CrossNodeMigrations, ok = p.Uint(64)
			return ok
		case "Hists":
			t.Hists = map[Cause]*Hist{}
			return p.UintObject(8, func(c uint64) bool {
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
	// The small fields go to encoding/json, one by one.
	small := func(v any) bool {
		raw, ok := p.Raw()
		return ok && json.Unmarshal(raw, v) == nil
	}
	ok := p.Object(func(key string) bool {
		switch key {
		case "Threads":
			s.Threads = map[uint32]*ThreadStats{}
			return p.UintObject(32, func(tid uint64) bool {
				t, ok := readThread(p)
				s.Threads[uint32(tid)] = t
				return ok
			})
		case "System":
			return small(&s.System)
		case "LostEvents":
			return small(&s.LostEvents)
		case "LostPerCPU":
			return small(&s.LostPerCPU)
		case "HistEntries":
			return small(&s.HistEntries)
		case "HistCapacity":
			return small(&s.HistCapacity)
		case "HistEvicted":
			return small(&s.HistEvicted)
		case "Descendants":
			return small(&s.Descendants)
		case "CauseTotals":
			s.CauseTotals = map[Cause]*Hist{}
			return p.UintObject(8, func(c uint64) bool {
				h, ok := readHist(p)
				s.CauseTotals[Cause(c)] = &h
				return ok
			})
		}
		return false
	})
	return s, ok
}
