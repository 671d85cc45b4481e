package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/run"
)

// The report says where its latencies came from: one line under the
// first and its warnings (a source that gave nothing usable says so
// second), and latency_source in the JSON summary. A run without a
// source (or a recording from before its header said) has neither.
func TestReportSaysTheLatencySource(t *testing.T) {
	src := run.LatencySource{Kind: run.LatencyKernel,
		Detail: "requests on sockets of 0.0.0.0:6379 (12 connections at start); server-side: excludes the network\x1b[2J"}
	for _, tc := range []struct {
		src        run.LatencySource
		line, json string // "" for none
	}{
		{src, "latency: kernel: requests on sockets of 0.0.0.0:6379 (12 connections at start); server-side: excludes the network\\x1b[2J",
			`"latency_source":{"kind":"kernel","detail":"requests on sockets of 0.0.0.0:6379 (12 connections at start); server-side: excludes the network\u001b[2J"}`},
		{run.LatencySource{}, "", ""},
	} {
		rep := NewReport(run.Description{Target: "pid 7 (redis)", Latency: tc.src}, run.End{}, aggregate.Summary{}, nil, 10)
		var text bytes.Buffer
		if err := rep.unwrapped(&text); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(text.String(), "\n")
		if got := lines[2]; (tc.line == "" && strings.HasPrefix(got, "latency")) || (tc.line != "" && got != tc.line) {
			t.Errorf("third line %q, want %q", got, tc.line)
		}
		js, err := json.Marshal(rep.summaryLine())
		if err != nil {
			t.Fatal(err)
		}
		if has := bytes.Contains(js, []byte(`"latency_source"`)); has != (tc.json != "") || !bytes.Contains(js, []byte(tc.json)) {
			t.Errorf("summary %s\nwant %s", js, tc.json)
		}
	}
	rep := NewReport(run.Description{Latency: run.LatencySource{Kind: run.LatencyProm, Detail: "m at http://h/metrics"}},
		run.End{Latency: &latency.Account{Late: 3}}, aggregate.Summary{}, nil, 10)
	var text bytes.Buffer
	rep.unwrapped(&text)
	if lines := strings.Split(text.String(), "\n"); !strings.HasPrefix(lines[3], "WARNING: 3 latency samples came after") ||
		lines[4] != "latency: prometheus: m at http://h/metrics" {
		t.Errorf("the source's line is not after the warnings:\n%s", text.String())
	}
}
