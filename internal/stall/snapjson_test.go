package stall

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/jsonfast"
)

// decodeBoth decodes b over start with the fast path and with plain
// encoding/json, and fails when they differ in result or in error.
func decodeBoth(t *testing.T, b []byte, start Hist) {
	t.Helper()
	fast, plain := start, start
	fastErr := json.Unmarshal(b, &fast)
	type noMethod Hist
	plainErr := json.Unmarshal(b, (*noMethod)(&plain))
	if (fastErr == nil) != (plainErr == nil) || fast != plain {
		t.Fatalf("%q: fast %+v (err %v), encoding/json %+v (err %v)", b, fast, fastErr, plain, plainErr)
	}
}

func TestHistJSONAsEncodingJSON(t *testing.T) {
	h := Hist{Count: 3, TotalNs: 1 << 40, MaxNs: 1<<64 - 1, NestedNs: 7}
	h.Slots[0], h.Slots[5], h.Slots[HistSlots-1] = 1, 2, 1<<63
	written, err := json.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := readHist(jsonfast.New(written)); !ok || v != h {
		t.Fatalf("the fast path does not take what numatrace writes: %s", written)
	}
	old := Hist{Count: 9, MaxNs: 9}
	old.Slots[39] = 9
	n40 := strings.TrimSuffix(strings.Repeat("1,", HistSlots), ",")
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
		decodeBoth(t, []byte(in), Hist{})
		decodeBoth(t, []byte(in), old)
	}
}

// FuzzHistJSON holds the fast path to encoding/json's result on any input.
func FuzzHistJSON(f *testing.F) {
	for _, s := range []string{`{"Count":1,"TotalNs":2,"MaxNs":3,"NestedNs":0,"Slots":[0,1,2]}`, `{"count":1}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, plain Hist
		fastErr := json.Unmarshal(b, &fast)
		type noMethod Hist
		plainErr := json.Unmarshal(b, (*noMethod)(&plain))
		if (fastErr == nil) != (plainErr == nil) || !reflect.DeepEqual(fast, plain) {
			t.Fatalf("%q: fast %+v (%v), encoding/json %+v (%v)", b, fast, fastErr, plain, plainErr)
		}
	})
}

// A snapshot decodes to the same thing through the fast path.
func TestSnapshotJSONRoundTrip(t *testing.T) {
	s := &Snapshot{LostPerCPU: []uint64{1, 2}}
	for tid := uint32(1); tid < 50; tid++ {
		th := s.Thread(tid/10, tid, fmt.Sprint("t", tid))
		for c := Cause(0); c < NumCauses; c += 2 {
			h := &Hist{}
			h.Add(uint64(tid) * 1000 * uint64(c+1))
			th.Hists[c] = h
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(&back, s) {
		t.Fatalf("round trip differs (err %v)", err)
	}
}

// threadBoth decodes b into a zero ThreadStats with the fast path and
// with plain encoding/json, and fails when they differ.
func threadBoth(t *testing.T, b []byte) {
	t.Helper()
	var fast, plain ThreadStats
	fastErr := json.Unmarshal(b, &fast)
	type noMethod ThreadStats
	plainErr := json.Unmarshal(b, (*noMethod)(&plain))
	if (fastErr == nil) != (plainErr == nil) || !reflect.DeepEqual(fast, plain) {
		t.Fatalf("%q: fast %+v (err %v), encoding/json %+v (err %v)", b, fast, fastErr, plain, plainErr)
	}
}

func TestThreadJSONAsEncodingJSON(t *testing.T) {
	th := ThreadStats{PID: 1<<32 - 1, TID: 7, Comm: "kworker/u8:2", Migrations: 3, CrossNodeMigrations: 1,
		Hists: map[Cause]*Hist{MmapLock: {Count: 1, Slots: [HistSlots]uint64{3: 1}}, DirectReclaim: {}}}
	written, err := json.Marshal(&th)
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

// snapshotBoth decodes b with ReadSnapshot (encoding/json when it says
// no) and with plain encoding/json, and fails when they differ.
func snapshotBoth(t *testing.T, b []byte) {
	t.Helper()
	p := jsonfast.New(b)
	fast, ok := ReadSnapshot(p)
	var fastErr error
	if !ok || !p.End() {
		fast = &Snapshot{}
		fastErr = json.Unmarshal(b, fast)
	}
	plain := &Snapshot{}
	plainErr := json.Unmarshal(b, plain)
	if (fastErr == nil) != (plainErr == nil) || (plainErr == nil && !reflect.DeepEqual(fast, plain)) {
		t.Fatalf("%q: fast %+v (err %v), encoding/json %+v (err %v)", b, fast, fastErr, plain, plainErr)
	}
}

func TestSnapshotJSONAsEncodingJSON(t *testing.T) {
	s := &Snapshot{LostEvents: 3, LostPerCPU: []uint64{1, 2}, HistEntries: 5, HistCapacity: 16384,
		System: SystemStats{KswapdWakeups: 1, TargetsFull: 2}, HistEvicted: 7,
		CauseTotals: map[Cause]*Hist{MmapLock: {Count: 9, TotalNs: 90, Slots: [HistSlots]uint64{3: 9}}},
		Descendants: &Descendants{Stalled: 2, NotWatched: 1, Causes: map[Cause]StallTime{MemcgReclaim: {Count: 3, TotalNs: 30, NestedNs: 1}}}}
	s.Thread(1, 2, "a").Hists[MmapLock] = &Hist{Count: 1}
	s.Thread(1, 3, "b")
	written, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := ReadSnapshot(jsonfast.New(written)); !ok || !reflect.DeepEqual(v, s) {
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
	} {
		snapshotBoth(t, []byte(in))
	}
}

// FuzzSnapshotJSON holds ReadSnapshot to encoding/json's result.
func FuzzSnapshotJSON(f *testing.F) {
	f.Add([]byte(`{"Threads":{"5":{"PID":1,"TID":5,"Comm":"x","Hists":{"7":{"Count":1,"Slots":[0,1]}}}},"System":{"KswapdWakeups":1},"LostEvents":0,"LostPerCPU":[1],"HistEntries":1,"HistCapacity":2,"HistEvicted":3,"CauseTotals":{"7":{"Count":4}}}`))
	f.Fuzz(func(t *testing.T, b []byte) { snapshotBoth(t, b) })
}
