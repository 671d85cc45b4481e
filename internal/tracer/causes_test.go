//go:build linux

package tracer

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/numatrace/numatrace/internal/stall"
)

// The C enum in bpf/numatrace.h, as compiled into the committed objects,
// names the same causes at the same numbers as internal/stall.
func TestCEnumMatchesTheCauseTable(t *testing.T) {
	spec, err := loadTypes()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCauses(spec.Types); err != nil {
		t.Fatal(err)
	}
}

// Each way the two can drift is caught, with a line that says where.
func TestCheckCauseEnumCatchesDrift(t *testing.T) {
	good := func() *btf.Enum {
		e := &btf.Enum{Name: "cause"}
		for _, c := range stall.AllCauses() {
			e.Values = append(e.Values, btf.EnumValue{Name: "CAUSE_" + strings.ToUpper(c.String()), Value: uint64(c)})
		}
		e.Values = append(e.Values, btf.EnumValue{Name: "CAUSE_MAX", Value: uint64(stall.NumCauses)})
		return e
	}
	if err := checkCauseEnum(good()); err != nil {
		t.Fatalf("the table's own enum: %v", err)
	}
	cases := map[string]func(*btf.Enum){
		"a cause added in C only": func(e *btf.Enum) {
			e.Values[len(e.Values)-1].Value++
			e.Values = append(e.Values, btf.EnumValue{Name: "CAUSE_NEW", Value: uint64(stall.NumCauses)})
		},
		"a cause missing in C": func(e *btf.Enum) { e.Values = append(e.Values[:2], e.Values[3:]...) },
		"two causes swapped":   func(e *btf.Enum) { e.Values[0].Value, e.Values[1].Value = 1, 0 },
		"CAUSE_MAX off":        func(e *btf.Enum) { e.Values[len(e.Values)-1].Value = 99 },
		"a bad prefix":         func(e *btf.Enum) { e.Values[0].Name = "DIRECT_RECLAIM" },
	}
	for name, edit := range cases {
		e := good()
		edit(e)
		err := checkCauseEnum(e)
		if err == nil {
			t.Errorf("%s: not caught", name)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %q is more than one line", name, err)
		}
	}
}
