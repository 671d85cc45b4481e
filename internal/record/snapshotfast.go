package record

import (
	"encoding/json"

	"github.com/numatrace/numatrace/internal/jsonfast"
	"github.com/numatrace/numatrace/internal/stall"
)

// Snapshots decode by hand, straight into the stall types, when they
// look as numatrace writes them: replay reads a recording's final
// snapshot, one histogram per thread and cause, and encoding/json's
// reflection made that a fifth of a replay's time. Anything else
// (unknown, repeated or differently cased keys, escapes, non-ASCII,
// numbers that are not plain unsigned integers, null) goes to
// encoding/json through the format's shapes (snapshotjson.go), so results
// and errors are always its own.

// decodeSnapshot decodes a snapshot record: by hand when it is as
// numatrace writes it (a final snapshot holds a histogram per thread and
// cause, and this is replay's largest record), else with encoding/json.
func decodeSnapshot(body []byte) (*Snapshot, error) {
	if s, ok := readSnapshot(body); ok {
		return s, nil
	}
	return snapshotFromJSON(body)
}

// snapshotFromJSON decodes a snapshot record with encoding/json.
func snapshotFromJSON(body []byte) (*Snapshot, error) {
	j, err := decodeJSON[snapshotRecord](body, "snapshot")
	if err != nil {
		return nil, err
	}
	return j.snapshot(), nil
}

// readSnapshot decodes a snapshot record as numatrace writes it, or says
// it is not in that shape.
func readSnapshot(body []byte) (*Snapshot, bool) {
	var s Snapshot
	p := jsonfast.New(body)
	ok := p.Object(func(key string) (ok bool) {
		switch key {
		case "mono_ns":
			s.MonoNs, ok = p.Uint(64)
		case "final":
			s.Final, ok = p.Bool()
		case "data":
			s.Data, ok = readSnapshotData(p)
		}
		return ok
	})
	return &s, ok && p.End()
}

// readSnapshotData reads a snapshot record's data from p, or says it is
// not in numatrace's shape.
func readSnapshotData(p *jsonfast.Parser) (*stall.Snapshot, bool) {
	s := &stall.Snapshot{}
	var desc *descendantsJSON
	// The small fields go to encoding/json, one by one.
	small := func(v any) bool {
		raw, ok := p.Raw()
		return ok && json.Unmarshal(raw, v) == nil
	}
	ok := p.Object(func(key string) bool {
		switch key {
		case "Threads":
			s.Threads = map[uint32]*stall.ThreadStats{}
			return p.UintObject(32, func(tid uint64) bool {
				t, ok := readThread(p)
				s.Threads[uint32(tid)] = t
				return ok
			})
		case "System":
			return small((*systemJSON)(&s.System))
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
			return small(&desc)
		case "CauseTotals":
			s.CauseTotals = map[stall.Cause]*stall.Hist{}
			return p.UintObject(8, func(c uint64) bool {
				h, ok := readHist(p)
				s.CauseTotals[stall.Cause(c)] = &h
				return ok
			})
		}
		return false
	})
	s.Descendants = desc.descendants()
	return s, ok
}

func readThread(p *jsonfast.Parser) (*stall.ThreadStats, bool) {
	t := &stall.ThreadStats{}
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
			t.Hists = map[stall.Cause]*stall.Hist{}
			return p.UintObject(8, func(c uint64) bool {
				h, ok := readHist(p)
				t.Hists[stall.Cause(c)] = &h // a key given twice: the last, as in encoding/json
				return ok
			})
		}
		return false
	})
	return t, ok
}

func readHist(p *jsonfast.Parser) (h stall.Hist, ok bool) {
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
				if i < stall.HistSlots {
					h.Slots[i], ok = p.Uint(64)
				}
				return ok
			})
		}
		return false
	})
	return h, ok
}
