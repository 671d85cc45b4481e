//go:build linux

package tracer

import (
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/numatrace/numatrace/internal/stall"
)

// A stall timed from a begin to an end hook is open in between, in a
// pending slot of its own (enum pending_slot, bpf/common.h): a probe of
// a timed cause with both hooks names its slots, no two causes share
// one, and every slot in the committed objects belongs to a probe.
func TestEveryBeginEndProbeHasItsSlot(t *testing.T) {
	spec, err := loadTypes()
	if err != nil {
		t.Fatal(err)
	}
	var enum *btf.Enum
	if err := spec.Types.TypeByName("pending_slot", &enum); err != nil {
		t.Fatalf("enum pending_slot in the committed objects: %v", err)
	}
	owner := map[typesPendingSlot]stall.Cause{}
	for _, top := range probeDefs {
		for d := &top; d != nil; d = d.fallback {
			if d.cause == nil {
				continue
			}
			c := *d.cause
			if c.Timed() && len(d.hooks) > 1 && len(d.slots) == 0 {
				t.Errorf("probe %s times %s from a begin to an end hook but names no SLOT_* (bpf/common.h) to keep it open in", d.name, c)
			}
			for _, s := range d.slots {
				if s >= typesPendingSlotSLOT_MAX {
					t.Errorf("probe %s: slot %d is not below SLOT_MAX", d.name, s)
				}
				if o, ok := owner[s]; ok && o != c {
					t.Errorf("probe %s (%s) shares slot %d with %s", d.name, c, s, o)
				}
				owner[s] = c
			}
		}
	}
	for _, v := range enum.Values {
		if s := typesPendingSlot(v.Value); s != typesPendingSlotSLOT_MAX {
			if _, ok := owner[s]; !ok {
				t.Errorf("%s (bpf/common.h) is no probe's: name it in its probe's slots (probes.go)", v.Name)
			}
		}
	}
}
