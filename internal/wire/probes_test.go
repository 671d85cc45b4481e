package wire

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
)

// A probe's status is written as docs/FORMAT.md §3.1 has it (`probes
// --json` has no golden file of its own), and comes back whole.
func TestProbeStatusAsTheFormatsWriteIt(t *testing.T) {
	ps := []stall.ProbeStatus{{Name: "numa_migration", Cause: "numa_migration", Description: "d",
		Tracepoints: []string{"migrate:mm_migrate_pages"}, Programs: []string{"v2"}, Error: "e"},
		{Name: "reclaim", Attached: true}, {Name: "mmap_lock", Skipped: true}}
	want := `[{"name":"numa_migration","cause":"numa_migration","description":"d","tracepoints":["migrate:mm_migrate_pages"],` +
		`"programs":["v2"],"attached":false,"error":"e"},{"name":"reclaim","attached":true},` +
		`{"name":"mmap_lock","attached":false,"skipped":true}]`
	b, err := json.Marshal(NewProbes(ps))
	if err != nil || string(b) != want {
		t.Fatalf("written (err %v)\n %s\nwant\n %s", err, b, want)
	}
	if back := ProbeStatuses(NewProbes(ps)); !reflect.DeepEqual(back, ps) {
		t.Errorf("back: %+v", back)
	}
	if b, _ := json.Marshal(NewProbes(nil)); string(b) != "null" || ProbeStatuses(nil) != nil {
		t.Errorf("no probes are written as %s", b)
	}
}
