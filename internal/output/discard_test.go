package output

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/stall"
)

// A run whose latency samples all lay outside the trace, with two bad
// lines and three records the kernel sent that could not be decoded.
func discardReport() *Report {
	return &Report{Target: "pid 4242 (cat)", Kernel: "6.18.0", DurationNs: 25_000_000_000, Events: 9,
		Probes: []stall.ProbeStatus{{Name: "reclaim", Attached: true}},
		Latency: &latency.Account{StartNs: 1856e9, EndNs: 1881e9, Before: 11976, OutsideMinNs: 2147483647, OutsideMaxNs: 2147483647,
			Likely:  "every sample says 2147483647, the largest 32-bit integer: the writer's integer overflowed (awk's printf %d stops there)",
			Skipped: []latency.Skip{{Kind: latency.SkipMalformed, N: 2}}},
		BadRecords: 3}
}

// The report's first lines say that the latency source gave nothing
// usable and why, before anything else.
func TestTextSaysWhatWasLeftOutFirst(t *testing.T) {
	var buf bytes.Buffer
	if err := discardReport().unwrapped(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	want := []string{
		"numatrace: pid 4242 (cat) for 25s on 6.18.0",
		"probes 1/1 attached | events 9 | lost events 0",
		"WARNING: the latency source gave nothing usable (see below): there is no spike analysis",
		"WARNING: 11,976 latency samples lie outside the trace: their times are 2.1 s after boot, the trace covered 1,856–1,881 s; check their clock and unit: every sample says 2147483647, the largest 32-bit integer: the writer's integer overflowed (awk's printf %d stops there)",
		"WARNING: 2 malformed lines of the latency file were skipped",
		"WARNING: 3 ring-buffer records from the kernel could not be read or decoded (an unknown cause, a short record) and were left out",
		"",
	}
	if !reflect.DeepEqual(lines[:len(want)], want) {
		t.Fatalf("first lines:\n%s\nwant:\n%s", strings.Join(lines[:len(want)], "\n"), strings.Join(want, "\n"))
	}
}

// The JSON summary carries the same counts and words.
func TestSummaryCarriesWhatWasLeftOut(t *testing.T) {
	var buf bytes.Buffer
	if err := NewNDJSON(&buf).Summary(discardReport()); err != nil {
		t.Fatal(err)
	}
	var s struct {
		BadRecords   uint64 `json:"bad_records"`
		LatencyInput struct {
			Usable       bool              `json:"usable"`
			Samples      uint64            `json:"samples"`
			OutsideTrace uint64            `json:"outside_trace"`
			BeforeTrace  uint64            `json:"before_trace"`
			AfterTrace   uint64            `json:"after_trace"`
			OutsideMinNs uint64            `json:"outside_min_ns"`
			Likely       string            `json:"likely"`
			Skipped      map[string]uint64 `json:"skipped"`
			Warnings     []string          `json:"warnings"`
		} `json:"latency_input"`
	}
	if err := json.Unmarshal(buf.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	li := s.LatencyInput
	if s.BadRecords != 3 || li.Usable || li.Samples != 0 || li.OutsideTrace != 11976 || li.BeforeTrace != 11976 || li.AfterTrace != 0 ||
		li.OutsideMinNs != 2147483647 || !strings.Contains(li.Likely, "32-bit") || li.Skipped["malformed_lines"] != 2 || len(li.Warnings) != 3 {
		t.Fatalf("summary %+v", s)
	}
	if !strings.HasPrefix(li.Warnings[1], "11,976 latency samples lie outside the trace") {
		t.Errorf("warnings %q", li.Warnings)
	}
	// Without a latency source there is no latency_input.
	buf.Reset()
	NewNDJSON(&buf).Summary(&Report{})
	if strings.Contains(buf.String(), "latency_input") {
		t.Errorf("latency_input without a source: %s", buf.String())
	}
}

// The JSON summary keys what a source skipped by each kind's key, not
// by its words for people, which the warnings keep.
func TestSummaryKeysSkipsByKind(t *testing.T) {
	a := &latency.Account{Samples: 1, Skipped: []latency.Skip{{Kind: latency.SkipLateWrites, N: 7},
		{Kind: latency.SkipDueWaits, N: 8}, {Kind: latency.SkipUnknown, N: 9, Name: "newer_kind"}}}
	j := latencyInput(a)
	want := map[string]uint64{"late_writes": 7, "counted_from_due": 8, "newer_kind": 9}
	if !reflect.DeepEqual(j.Skipped, want) {
		t.Errorf("skipped %v, want %v", j.Skipped, want)
	}
	if len(j.Warnings) != 3 || !strings.HasPrefix(j.Warnings[0], "7 writes of a response came more than 20 ms after") {
		t.Errorf("warnings %q", j.Warnings)
	}
}
