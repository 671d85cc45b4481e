//go:build linux

package live

import (
	"bytes"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/stall"
)

// countingRecorder is the recorder behind progress: it sees each call.
type countingRecorder struct{ events, lost int }

func (c *countingRecorder) Event(*stall.Event)             { c.events++ }
func (c *countingRecorder) Snapshot(record.Snapshot) error { return nil }
func (c *countingRecorder) Procfs(record.Procfs) error     { return nil }
func (c *countingRecorder) Lost(record.Lost)               { c.lost++ }
func (c *countingRecorder) Latency(latency.Stats) error    { return nil }
func (c *countingRecorder) Flush()                         {}

// Each tick prints one line with the events and lost events so far and
// what the recording holds; the recorder behind still gets every call;
// after stop nothing more is written.
func TestProgressLines(t *testing.T) {
	inner := &countingRecorder{}
	p := &progress{Recorder: inner}
	var out bytes.Buffer
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ticks, stop, done := make(chan time.Time), make(chan struct{}), make(chan struct{})
	go p.report(&out, start, ticks, func() string { return "1.5 MiB written" }, stop, done)

	for range 3 {
		p.Event(&stall.Event{})
	}
	p.Lost(record.Lost{LostEvents: 7})
	ticks <- start.Add(2 * time.Second)
	p.Event(&stall.Event{})
	ticks <- start.Add(4*time.Second + 300*time.Millisecond)
	close(stop)
	<-done

	want := "numatrace: recording for 2s: 3 events, 7 lost, 1.5 MiB written\n" +
		"numatrace: recording for 4s: 4 events, 7 lost, 1.5 MiB written\n"
	if out.String() != want {
		t.Errorf("progress wrote\n%q\nwant\n%q", out.String(), want)
	}
	if inner.events != 4 || inner.lost != 1 {
		t.Errorf("the recorder got %d events and %d lost readings, want 4 and 1", inner.events, inner.lost)
	}
}

func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB",
		5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB", 2048 << 40: "2048.0 TiB"} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
