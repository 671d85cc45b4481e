package record

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
)

// sampleEvents reads the real events of the shipped recordings.
func sampleEvents(b *testing.B, name string) []stall.Event {
	r, err := Open(filepath.Join("..", "..", "testdata", "recordings", name))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var evs []stall.Event
	for {
		it, err := r.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			b.Fatal(err)
		}
		if it.Kind == ItemEvent {
			evs = append(evs, it.Event)
		}
	}
}

type countingSink struct{ bytes int }

func (c *countingSink) put(f frame) bool { c.bytes += len(f.bytes); return true }

// BenchmarkRecord measures the recorder's cost per event and the bytes per
// stall event on disk (blocks only: the header is per file), encoding each
// sample recording's real events once per iteration.
func BenchmarkRecord(b *testing.B) {
	for _, name := range []string{"vm-6.1-misplaced.ntr", "vm-6.1-directreclaim.ntr", "memcg-host.ntr"} {
		evs := sampleEvents(b, name)
		b.Run(name, func(b *testing.B) {
			var bytes int
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sink := &countingSink{}
				w, err := newWriter(Header{}, sink)
				if err != nil {
					b.Fatal(err)
				}
				for j := range evs {
					w.Event(&evs[j])
				}
				w.Flush()
				bytes = sink.bytes
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
			b.ReportMetric(float64(bytes)/float64(len(evs)), "bytes/event")
			b.ReportMetric(float64(len(evs)), "events")
		})
	}
}

// BenchmarkRead measures decoding: events per second per core.
func BenchmarkRead(b *testing.B) {
	path := filepath.Join("..", "..", "testdata", "recordings", "vm-6.1-misplaced.ntr")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	events := len(sampleEvents(b, "vm-6.1-misplaced.ntr"))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
		r.Close()
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
