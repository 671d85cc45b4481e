package record

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/jsonfast"
	"github.com/numatrace/numatrace/internal/stall"
)

// histBoth fails when the hand decoder takes b and encoding/json, through
// the format's shape, reads it otherwise or not at all. What the hand
// decoder declines goes to encoding/json itself.
func histBoth(t *testing.T, b []byte) {
	t.Helper()
	p := jsonfast.New(b)
	fast, ok := readHist(p)
	if !ok || !p.End() {
		return
	}
	var plain histJSON
	if err := json.Unmarshal(b, &plain); err != nil || fast != *plain.hist() {
		t.Fatalf("%q: hand decoder %+v, encoding/json %+v (err %v)", b, fast, plain, err)
	}
}

func TestHistJSONAsEncodingJSON(t *testing.T) {
	h := stall.Hist{Count: 3, TotalNs: 1 << 40, MaxNs: 1<<64 - 1, NestedNs: 7}
	h.Slots[0], h.Slots[5], h.Slots[stall.HistSlots-1] = 1, 2, 1<<63
	written, err := json.Marshal(newHistJSON(&h))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := readHist(jsonfast.New(written)); !ok || v != h {
		t.Fatalf("the fast path does not take what numatrace writes: %s", written)
	}
	n40 := strings.TrimSuffix(strings.Repeat("1,", stall.HistSlots), ",")
	for _, in := range []string{
		string(written),
		`{}`, ` { "Count" : 1 , "Slots" : [ 1 , 2 ] } `, `{"Count":1}`, `{"Slots":[]}`,
		`{"Slots":[` + n40 + `]}`, `{"Slots":[` + n40 + `,1]}`, // one too many: encoding/json drops it
		`{"count":1}`, `{"COUNT":2,"Count":3}`, `{"Count":1,"Count":2}`, `{"Other":1}`,
		`{"Count":18446744073709551615}`, `{"Count":18446744073709551616}`, `{"Count":-1}`,
		`{"Count":1.0}`, `{"Count":1e3}`, `{"Count":01}`, `{"Count":"1"}`, `{"Count":null}`,
		`{"Slots":null}`, `{"Slots":[null]}`, `null`, `[]`, `{"Cou\u006et":4}`, `{"Count":1,}`,
		`{"Count":1`, `{"Count" 1}`, `{"Slots":[1,]}`, `{"Slots":[1 2]}`, `{"Count":1}x`, "{\"Count\":\t1}",
	} {
		histBoth(t, []byte(in))
	}
}

// FuzzHistJSON holds the fast path to encoding/json's result on any input.
func FuzzHistJSON(f *testing.F) {
	for _, s := range []string{`{"Count":1,"TotalNs":2,"MaxNs":3,"NestedNs":0,"Slots":[0,1,2]}`, `{"count":1}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { histBoth(t, b) })
}

// A snapshot decodes back to itself, by hand and through encoding/json.
func TestSnapshotJSONRoundTrip(t *testing.T) {
	s := &stall.Snapshot{LostPerCPU: []uint64{1, 2}}
	for tid := uint32(1); tid < 50; tid++ {
		th := s.Thread(tid/10, tid, fmt.Sprint("t", tid))
		for c := stall.Cause(0); c < stall.NumCauses; c += 2 {
			h := &stall.Hist{}
			h.Add(uint64(tid) * 1000 * uint64(c+1))
			th.Hists[c] = h
		}
	}
	b, err := recordJSON(recSnapshot, Snapshot{MonoNs: 9, Data: s})
	if err != nil {
		t.Fatal(err)
	}
	fast, ok := readSnapshot(b)
	plain, err := snapshotFromJSON(b)
	if !ok || err != nil || !reflect.DeepEqual(fast.Data, s) || !reflect.DeepEqual(plain.Data, s) {
		t.Fatalf("round trip differs (hand decoder took it: %v, encoding/json: %v)", ok, err)
	}
}

// threadBoth is histBoth for a thread's statistics.
func threadBoth(t *testing.T, b []byte) {
	t.Helper()
	p := jsonfast.New(b)
	fast, ok := readThread(p)
	if !ok || !p.End() {
		return
	}
	var plain threadJSON
	if err := json.Unmarshal(b, &plain); err != nil || !reflect.DeepEqual(fast, plain.thread()) {
		t.Fatalf("%q: hand decoder %+v, encoding/json %+v (err %v)", b, fast, plain, err)
	}
}

func TestThreadJSONAsEncodingJSON(t *testing.T) {
	th := stall.ThreadStats{PID: 1<<32 - 1, TID: 7, Comm: "kworker/u8:2", Migrations: 3, CrossNodeMigrations: 1,
		Hists: map[stall.Cause]*stall.Hist{stall.MmapLock: {Count: 1, Slots: [stall.HistSlots]uint64{3: 1}}, stall.DirectReclaim: {}}}
	written, err := json.Marshal(newThreadJSON(&th))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := readThread(jsonfast.New(written)); !ok || !reflect.DeepEqual(*v, th) {
		t.Fatalf("the fast path does not take what numatrace writes: %s", written)
	}
	for _, in := range []string{
		string(written), `{}`, `{"Hists":{}}`, `{"Hists":null}`, `{"Hists":{"3":null}}`, `{"Hists":{"256":{}}}`,
		`{"Hists":{"03":{}}}`, `{"Hists":{"x":{}}}`, `{"Hists":{"3":{"Count":1},"3":{"MaxNs":2}}}`,
		`{"Hists":{"1":{}},"Hists":{"2":{}}}`, `{"Hists":{"3":{"Count":1,"Slots":[1,2]}}}`,
		`{"Hists":{"3":{"X}":1}}}`, `{"Hists":{"3":{"Count":"}"}}}`, `{"Hists":{"3":{"\u0043ount":1}}}`,
		`{"PID":4294967296}`, `{"PID":-1}`, `{"pid":1}`, `{"Comm":"a\"b"}`, `{"Comm":"\u00e9"}`, `{"Comm":"é"}`,
		`{"Comm":null}`, `{"Comm":1}`, `{"Other":{}}`, `{"PID":1,}`, `null`, `[]`, `{"Hists":{"3":{}}`,
	} {
		threadBoth(t, []byte(in))
	}
}

// FuzzThreadJSON holds the fast path to encoding/json's result on any input.
func FuzzThreadJSON(f *testing.F) {
	f.Add([]byte(`{"PID":1,"TID":2,"Comm":"x","Hists":{"7":{"Count":1,"TotalNs":2,"MaxNs":3,"NestedNs":0,"Slots":[0,1]}},"Migrations":0,"CrossNodeMigrations":0}`))
	f.Add([]byte(`{"Hists":{"1":{},"2":{"Count":5}}}`))
	f.Fuzz(func(t *testing.T, b []byte) { threadBoth(t, b) })
}

// snapshotBoth is histBoth for a snapshot record's data.
func snapshotBoth(t *testing.T, b []byte) {
	t.Helper()
	p := jsonfast.New(b)
	fast, ok := readSnapshotData(p)
	if !ok || !p.End() {
		return
	}
	var plain snapshotJSON
	if err := json.Unmarshal(b, &plain); err != nil || !reflect.DeepEqual(fast, plain.snapshot()) {
		t.Fatalf("%q: hand decoder %+v, encoding/json %+v (err %v)", b, fast, plain, err)
	}
}

func TestSnapshotJSONAsEncodingJSON(t *testing.T) {
	s := &stall.Snapshot{LostEvents: 3, LostPerCPU: []uint64{1, 2}, HistEntries: 5, HistCapacity: 16384,
		System: stall.SystemStats{KswapdWakeups: 1, TargetsFull: 2}, HistEvicted: 7,
		CauseTotals: map[stall.Cause]*stall.Hist{stall.MmapLock: {Count: 9, TotalNs: 90, Slots: [stall.HistSlots]uint64{3: 9}}},
		Descendants: &stall.Descendants{Stalled: 2, NotWatched: 1,
			Causes: map[stall.Cause]stall.StallTime{stall.MemcgReclaim: {Count: 3, TotalNs: 30, NestedNs: 1}}}}
	s.Thread(1, 2, "a").Hists[stall.MmapLock] = &stall.Hist{Count: 1}
	s.Thread(1, 3, "b")
	written, err := json.Marshal(newSnapshotJSON(s))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := readSnapshotData(jsonfast.New(written)); !ok || !reflect.DeepEqual(v, s) {
		t.Fatalf("the fast path does not take what numatrace writes: %s", written)
	}
	for _, in := range []string{
		string(written), `{}`, `{"Threads":{}}`, `{"Threads":null}`, `{"Threads":{"2":null}}`,
		`{"Threads":{"2":{"PID":1},"2":{"TID":2}}}`, `{"Threads":{"4294967296":{}}}`, `{"Threads":{" 2":{}}}`,
		`{"Threads":{},"Threads":{"1":{}}}`, `{"threads":{}}`, `{"LostPerCPU":null}`, `{"LostPerCPU":[1,-1]}`,
		`{"HistEntries":-1}`, `{"HistCapacity":1.5}`, `{"LostEvents":1-2}`, `{"System":{"kswapdwakeups":3}}`,
		`{"System":{"KswapdWakeups":"x"}}`, `{"System":{"Other":[1,{"a":"b\"}"}]}}`, `{"Other":1}`,
		`{"LostEvents":1,"LostEvents":2}`, `{"Threads":{"1":{"Hists":{"2":{"Slots":[` + strings.Repeat("1,", 45) + `1]}}}}}`,
		`{"Threads":{"1":{"Hists":{"2":{}}}}`, `null`, `{"LostEvents":01}`,
		`{"CauseTotals":{}}`, `{"CauseTotals":null}`, `{"CauseTotals":{"9":{"Count":1}}}`, `{"CauseTotals":{"x":{}}}`,
		`{"HistEvicted":-1}`, `{"CauseTotals":{"1":{"Count":1},"1":{"TotalNs":2}}}`,
		`{"Descendants":null}`, `{"Descendants":{"Stalled":1,"Causes":{"1":{"Count":2}}}}`, `{"Descendants":{"Causes":{"x":{}}}}`,
		`{"Descendants":{"Causes":{}}}`, `{"Descendants":{"Causes":null,"NotWatched":2}}`,
	} {
		snapshotBoth(t, []byte(in))
	}
}

// FuzzSnapshotJSON holds the hand decoder to encoding/json's result.
func FuzzSnapshotJSON(f *testing.F) {
	f.Add([]byte(`{"Threads":{"5":{"PID":1,"TID":5,"Comm":"x","Hists":{"7":{"Count":1,"Slots":[0,1]}}}},"System":{"KswapdWakeups":1},"LostEvents":0,"LostPerCPU":[1],"HistEntries":1,"HistCapacity":2,"HistEvicted":3,"CauseTotals":{"7":{"Count":4}}}`))
	f.Fuzz(func(t *testing.T, b []byte) { snapshotBoth(t, b) })
}

// A snapshot record is written as docs/FORMAT.md §8.1 shows it, nulls
// where the kernel's aggregates had nothing, and decodes back whole.
func TestSnapshotRecordAsTheFormatShowsIt(t *testing.T) {
	h := &stall.Hist{}
	h.Add(5)
	withThread := &stall.Snapshot{}
	withThread.Thread(1, 2, "x").Hists[stall.Compaction] = h
	bare := &stall.Snapshot{Threads: map[uint32]*stall.ThreadStats{3: {PID: 3, TID: 3}},
		Descendants: &stall.Descendants{Stalled: 1, Causes: map[stall.Cause]stall.StallTime{stall.MmapLock: {Count: 2, TotalNs: 4}}}}
	zeros := strings.TrimSuffix(strings.Repeat("0,", stall.HistSlots), ",")
	system := `"System":{"KswapdWakeups":0,"KhugepagedCollapses":0,"KhugepagedCollapsedOK":0,"KcompactdPasses":0,"KcompactdNs":0,"ProactivePasses":0,"ProactiveNs":0,"DirectCompactAttempts":0,"TargetsFull":0}`
	for _, c := range []struct {
		rec  Snapshot
		want string
	}{
		{Snapshot{MonoNs: 7, Final: true, Data: withThread}, `{"mono_ns":7,"final":true,"data":{"Threads":{"2":{"PID":1,"TID":2,"Comm":"x","Hists":{"3":{"Count":1,"TotalNs":5,"MaxNs":5,"NestedNs":0,"Slots":[0,0,1,` + zeros[6:] + `]}},"Migrations":0,"CrossNodeMigrations":0}},` + system + `,"LostEvents":0,"LostPerCPU":null,"HistEntries":0,"HistCapacity":0}}`},
		{Snapshot{MonoNs: 1, Data: &stall.Snapshot{CauseTotals: map[stall.Cause]*stall.Hist{}}}, `{"mono_ns":1,"data":{"Threads":null,` + system + `,"LostEvents":0,"LostPerCPU":null,"HistEntries":0,"HistCapacity":0}}`},
		{Snapshot{Data: bare}, `{"mono_ns":0,"data":{"Threads":{"3":{"PID":3,"TID":3,"Comm":"","Hists":null,"Migrations":0,"CrossNodeMigrations":0}},` + system + `,"LostEvents":0,"LostPerCPU":null,"HistEntries":0,"HistCapacity":0,"Descendants":{"Stalled":1,"Causes":{"7":{"Count":2,"TotalNs":4}}}}}`},
	} {
		b, err := recordJSON(recSnapshot, c.rec)
		if err != nil || string(b) != c.want {
			t.Fatalf("written (err %v)\n %s\nwant\n %s", err, b, c.want)
		}
		if c.rec.Data.CauseTotals != nil && len(c.rec.Data.CauseTotals) == 0 {
			c.rec.Data.CauseTotals = nil // omitted when empty: it reads back as none
		}
		if back, err := snapshotFromJSON(b); err != nil || !reflect.DeepEqual(*back, c.rec) {
			t.Fatalf("%s reads back as %+v (err %v)", b, back.Data, err)
		}
	}
}

// The shapes copied field by field have the fields of the stall types,
// in their order: a field added to one of those needs its key here.
func TestSnapshotShapesHaveTheStallFields(t *testing.T) {
	for _, pair := range [][2]any{{stall.Snapshot{}, snapshotJSON{}}, {stall.ThreadStats{}, threadJSON{}},
		{stall.Descendants{}, descendantsJSON{}}} {
		domain, shape := reflect.TypeOf(pair[0]), reflect.TypeOf(pair[1])
		var names [2][]string
		for i, ty := range []reflect.Type{domain, shape} {
			for f := range ty.Fields() {
				names[i] = append(names[i], f.Name)
			}
		}
		if !reflect.DeepEqual(names[0], names[1]) {
			t.Errorf("%v has fields %v, its shape %v %v", domain, names[0], shape, names[1])
		}
	}
}
