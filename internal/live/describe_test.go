//go:build linux

package live

import (
	"reflect"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency/source"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/target"
)

// The run's description says which latency source the flags named, for
// the report, the view and the recording; with none it says none.
func TestDescriptionSaysTheLatencySource(t *testing.T) {
	tgt := &target.Target{Kind: target.Process, ID: 7, Comm: "db"}
	for _, tc := range []struct {
		lat  source.Config
		want run.LatencySource
	}{
		{source.Config{Uprobe: "/usr/bin/db:handle"}, run.LatencySource{Kind: run.LatencyUprobe, Detail: "calls of /usr/bin/db:handle, timed in the kernel"}},
		{source.Config{File: "/tmp/req.log"}, run.LatencySource{Kind: run.LatencyFile, Detail: "/tmp/req.log"}},
		{source.Config{Mode: source.ModeOff}, run.LatencySource{}},
	} {
		a := &Attach{Latency: tc.lat, SpikeK: 2}
		if got := a.describe(nil, tgt, time.Now(), 1).Latency; got != tc.want {
			t.Errorf("%+v: described as %+v, want %+v", tc.lat, got, tc.want)
		}
	}
}

// --spike-on reaches the run's description as the percentile it names.
func TestDescriptionSaysWhatSpikesAreJudgedOn(t *testing.T) {
	tgt := &target.Target{Kind: target.Process, ID: 7, Comm: "db"}
	for flag, want := range map[string]run.Percentile{"": run.P99, "p99": run.P99, "p999": run.P999, "max": run.Max} {
		a := &Attach{Command: "attach", Trace: validTrace(), SpikeK: 2, SpikeOn: flag, Latency: source.Config{File: "-"}}
		if err := a.Check(); err != nil {
			t.Fatalf("--spike-on %q: %v", flag, err)
		}
		if got := a.describe(nil, tgt, time.Now(), 1).Spikes.On; got != want {
			t.Errorf("--spike-on %q: described as %v, want %v", flag, got, want)
		}
	}
}

// A source that needs the kernel gets it through an interface in
// source.Env, which the live run fills from the tracer: for a target that
// is one process, every one of them is set (a new one left unset would
// have its source fail to open only on a live run).
func TestLatencyEnvHasEveryTimer(t *testing.T) {
	env := (&Attach{}).latencyEnv(nil, &target.Target{Kind: target.Process, ID: 7}, record.Header{}, func(string) {})
	v := reflect.ValueOf(env)
	for i := range v.NumField() {
		if f := v.Field(i); (f.Kind() == reflect.Interface || f.Kind() == reflect.Func) && f.IsNil() {
			t.Errorf("source.Env.%s is not set for a process target (Attach.latencyEnv)", v.Type().Field(i).Name)
		}
	}
	if env.PID != 7 {
		t.Errorf("PID %d, want the target's 7", env.PID)
	}
}
