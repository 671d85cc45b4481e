package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/run"
)

// The report sets what PSI counted beside numatrace's union of memory
// stalls, per scope, in the text and the JSON alike, and says why a scope
// has no figure.
func TestPressureBesideTheStalls(t *testing.T) {
	rep := testReport()
	rep.Summary.MemoryStallNs = 1_200_000_000
	rep.Pressure = []run.Pressure{
		{Scope: "system", FromNs: 1, ToNs: 2, SomeNs: 1_900_000_000, FullNs: 100},
		{Scope: "/shop/db", FromNs: 1, ToNs: 2, SomeNs: 1_250_000_000},
		{Scope: "/other", Err: "memory PSI not available: PSI is off"},
	}
	var text bytes.Buffer
	if err := Print(rep, nil, &text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"MEMORY PRESSURE (PSI \"some\" over the run; numatrace: the union of the target's memory stalls, 1.20s)",
		"  PSI counted 1.90s of memory stall (system); numatrace timed 1.20s (63%): the rest is others'",
		"  PSI counted 1.25s of memory stall in this cgroup; numatrace timed 1.20s of it (96%)",
		"  PSI has no figure in this cgroup: memory PSI not available: PSI is off",
	} {
		if !strings.Contains(text.String(), want+"\n") {
			t.Errorf("the report lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := NewNDJSON(&js).Summary(rep); err != nil {
		t.Fatal(err)
	}
	s := decodeLines(t, js.Bytes())[0]
	if num(t, s, "memory_stall_ns") != 1_200_000_000 {
		t.Errorf("memory_stall_ns %v", s["memory_stall_ns"])
	}
	psi := s["psi"].([]any)
	if len(psi) != 3 {
		t.Fatalf("psi %v", psi)
	}
	sys, other := psi[0].(map[string]any), psi[2].(map[string]any)
	explained, _ := sys["explained"].(json.Number).Float64()
	if sys["scope"] != "system" || num(t, sys, "some_ns") != 1.9e9 || num(t, sys, "numatrace_ns") != 1.2e9 ||
		explained < 0.63 || explained > 0.64 {
		t.Errorf("system %v", sys)
	}
	if _, ok := other["explained"]; ok || other["error"] != "memory PSI not available: PSI is off" {
		t.Errorf("a scope without a figure: %v", other)
	}
}
