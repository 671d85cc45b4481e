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
	ps := []stall.ProbeStatus{{Name: "numa_migration", Cause: stall.NUMAMigration, Feeds: true, Description: "d",
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

// Every field of a probe's status survives the formats: one added to
// stall.ProbeStatus fails here until NewProbe and Status carry it.
func TestProbeStatusComesBackWhole(t *testing.T) {
	var p stall.ProbeStatus
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeOf(stall.Cause(0)):
			f.Set(reflect.ValueOf(stall.MmapLock)) // not 0, which a lost cause would read as
		case f.Kind() == reflect.String:
			f.SetString("x")
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Type() == reflect.TypeOf([]string(nil)):
			f.Set(reflect.ValueOf([]string{"x"}))
		default:
			t.Fatalf("ProbeStatus.%s: fill a %s in this test", v.Type().Field(i).Name, f.Type())
		}
	}
	if back := NewProbe(p).Status(); !reflect.DeepEqual(back, p) {
		t.Errorf("%+v came back as %+v", p, back)
	}
	// A cause this version does not know feeds none it knows; a probe
	// that feeds none writes no cause.
	if back := (ProbeStatus{Name: "x", Cause: "cause_of_tomorrow"}).Status(); back.Feeds {
		t.Errorf("an unknown cause read as %v", back.Cause)
	}
	if w := NewProbe(stall.ProbeStatus{Name: "kswapd_wakeup", Cause: stall.MmapLock}); w.Cause != "" {
		t.Errorf("a probe that feeds no cause is written with cause %q", w.Cause)
	}
}
