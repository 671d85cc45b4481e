//go:build linux

package live

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/session"
	"github.com/numatrace/numatrace/internal/stall"
)

// progressEvery is how often record says how far it got: often enough to
// show a long run is alive, rarely enough to stay readable.
const progressEvery = 2 * time.Second

// progress counts what reaches the recorder, for record's progress lines.
// The session calls the recorder in its goroutine; the lines are written
// from another, so the counts are atomic.
type progress struct {
	session.Recorder
	events atomic.Uint64
	lost   atomic.Uint64
}

func (p *progress) Event(ev *stall.Event) {
	p.events.Add(1)
	p.Recorder.Event(ev)
}

func (p *progress) Lost(l record.Lost) {
	p.lost.Store(l.LostEvents)
	p.Recorder.Lost(l)
}

// line is one progress line; stored says where the data is and how much.
func (p *progress) line(elapsed time.Duration, stored string) string {
	return fmt.Sprintf("numatrace: recording for %s: %d events, %d lost, %s\n",
		elapsed.Round(time.Second), p.events.Load(), p.lost.Load(), stored)
}

// report writes a line to w at each tick, timed from start, until stop
// is closed; it closes done as it returns, so no line follows the end.
func (p *progress) report(w io.Writer, start time.Time, ticks <-chan time.Time, stored func() string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case now := <-ticks:
			fmt.Fprint(w, p.line(now.Sub(start), stored()))
		case <-stop:
			return
		}
	}
}

// showProgress puts a counter between the session and the recorder and
// prints its progress to stderr until the returned func is called.
func (r *recording) showProgress(opt *session.Options, stderr io.Writer) (stop func()) {
	if r == nil {
		return func() {}
	}
	p := &progress{Recorder: opt.Recorder}
	opt.Recorder = p
	ticker := time.NewTicker(progressEvery)
	quit, done := make(chan struct{}), make(chan struct{})
	go p.report(stderr, time.Now(), ticker.C, r.stored, quit, done)
	return func() {
		ticker.Stop()
		close(quit)
		<-done
	}
}

// stored says how much the recording holds: in its file, or in memory
// for a flight recorder.
func (r *recording) stored() string {
	if r.flight != nil {
		return byteSize(int64(r.flight.Held())) + " held in memory"
	}
	size := int64(0)
	if st, err := os.Stat(r.path); err == nil {
		size = st.Size()
	}
	s := byteSize(size) + " written"
	if n := r.file.Dropped(); n > 0 {
		s += fmt.Sprintf(", %d events dropped (not written in time)", n)
	}
	return s
}

// byteSize is n in the largest binary unit it reaches, to a tenth.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, prefix := float64(n)/unit, "KMGT"
	i := 0
	for v >= unit && i < len(prefix)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, prefix[i])
}
