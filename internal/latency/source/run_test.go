package source

import (
	"context"
	"sync"

	"github.com/numatrace/numatrace/internal/latency"
)

// sourceRun is a source running on its own goroutine, as the session runs
// it: its readings on out, its warnings kept.
type sourceRun struct {
	out    chan latency.Reading
	done   chan error // Run's result
	cancel context.CancelFunc

	mu     sync.Mutex
	warned []string
}

// runSource starts src with room for buf readings.
func runSource(src Source, buf int) *sourceRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &sourceRun{out: make(chan latency.Reading, buf), done: make(chan error, 1), cancel: cancel}
	go func() {
		r.done <- src.Run(ctx, r.out, func(err error) { r.mu.Lock(); r.warned = append(r.warned, err.Error()); r.mu.Unlock() })
	}()
	return r
}

// warnings are those said so far.
func (r *sourceRun) warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.warned...)
}
