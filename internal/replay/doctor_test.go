package replay

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
)

// A replay reads the recorded doctor report once, at its edge: the
// report's findings and the view's (Doctor) are that one reading.
func TestFeederReadsTheRecordedDoctorReportOnce(t *testing.T) {
	doc := &doctor.Report{Nodes: 2, Findings: []doctor.Finding{{Check: "zone_reclaim_mode", Severity: doctor.Crit, Title: "zone reclaim is on"}},
		Interval: "1s"}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	h := record.NewHeader(run.Description{Target: "system-wide", StartNs: 1, WindowNs: 1e9}, record.Host{}, "v1", js)
	f := NewFeeder(h, Options{})
	if !reflect.DeepEqual(f.Doctor(), doc) {
		t.Fatalf("Doctor() = %+v, want %+v", f.Doctor(), doc)
	}
	rep := f.Finish(0)
	if &rep.Findings[0] != &f.Doctor().Findings[0] {
		t.Error("the report's findings are not the reading the feeder holds")
	}
	if none := NewFeeder(record.NewHeader(run.Description{WindowNs: 1e9}, record.Host{}, "v1", nil), Options{}); none.Doctor() != nil {
		t.Errorf("a recording without doctor's reading: %+v", none.Doctor())
	}
}
