//go:build linux

package tracer

import (
	"os"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
)

// A thread's freeze time leaves out the causes the table marks
// NotMemory, in the kernel as in Go: every object is loaded with exactly
// those causes in cfg_not_memory, and common.h names none of them itself.
func TestBPFFreezeTimeFollowsTheCauseTable(t *testing.T) {
	var want uint32
	for _, c := range stall.AllCauses() {
		if c.Desc().NotMemory {
			want |= 1 << uint(c)
		}
	}
	tr := &Tracer{}
	for name, load := range objectLoaders {
		spec, err := load()
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.configure(spec); err != nil {
			t.Fatalf("configure %s: %v", name, err)
		}
		v, ok := spec.Variables["cfg_not_memory"]
		if !ok {
			t.Errorf("%s: no cfg_not_memory: the kernel side does not take the not-memory causes from the table", name)
			continue
		}
		var got uint32
		if err := v.Get(&got); err != nil {
			t.Fatalf("%s: read cfg_not_memory: %v", name, err)
		}
		if got != want {
			t.Errorf("%s: cfg_not_memory is %#x, the cause table's not-memory causes are %#x", name, got, want)
		}
	}
	src, err := os.ReadFile("../../bpf/common.h")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range stall.AllCauses() {
		if name := "CAUSE_" + strings.ToUpper(c.String()); c.Desc().NotMemory && strings.Contains(string(src), name) {
			t.Errorf("bpf/common.h names %s: which causes freeze time leaves out is cfg_not_memory's, from the cause table", name)
		}
	}
}
