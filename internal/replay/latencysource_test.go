package replay

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/run"
)

// A replay's report says the latency source the recording's header
// names, as the live run's did; the recording without one says none.
func TestReplaySaysTheLatencySource(t *testing.T) {
	src := &record.LatencySource{Kind: "kernel", Detail: "requests on sockets of 127.0.0.1:5432 (3 connections at start)"}
	for _, hs := range []*record.LatencySource{src, nil} {
		path := filepath.Join(t.TempDir(), "r.ntr")
		w, err := record.Create(path, record.Header{StartNs: 1000, WindowNs: uint64(time.Second), Target: "pid 7 (db)", LatencySource: hs})
		if err != nil {
			t.Fatal(err)
		}
		w.Close(run.End{EndNs: 2e9, DurationNs: 2e9 - 1000})
		var text bytes.Buffer
		if err := replayFile(t, path).Text(&text); err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(text.String(), "\nlatency: kernel: requests on sockets of 127.0.0.1:5432 (3 connections at start)\n")
		if got != (hs != nil) || (hs == nil && strings.Contains(text.String(), "\nlatency:")) {
			t.Errorf("header source %+v, report:\n%s", hs, text.String())
		}
	}
}
