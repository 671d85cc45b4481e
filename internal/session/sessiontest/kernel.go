// Package sessiontest has a fake of the live tracer for tests of the
// session and of what it records: events go in as stall.Events, never as
// ring-buffer bytes.
package sessiontest

import (
	"sync"

	"github.com/numatrace/numatrace/internal/stall"
)

// Kernel stands in for the tracer: it delivers the events a test pushes,
// drains them on Stop, and logs the calls that must come in order.
type Kernel struct {
	mu      sync.Mutex
	queue   []stall.Event
	stopped bool
	wake    chan struct{}
	calls   []string
	added   []uint32
	lost    uint64
	bad     uint64
	handed  int // events the stream has given its sink
	snap    func() *stall.Snapshot
}

// NewKernel makes a kernel whose snapshots come from snap.
func NewKernel(snap func() *stall.Snapshot) *Kernel {
	return &Kernel{wake: make(chan struct{}, 1), snap: snap}
}

// Push hands events to the stream, as the kernel submits them.
func (k *Kernel) Push(evs ...stall.Event) {
	k.mu.Lock()
	k.queue = append(k.queue, evs...)
	k.mu.Unlock()
	k.poke()
}

func (k *Kernel) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// SetLost sets the ring buffer's count of dropped events.
func (k *Kernel) SetLost(n uint64) { k.mu.Lock(); k.lost = n; k.mu.Unlock() }

// SetBad sets the count of undecodable records.
func (k *Kernel) SetBad(n uint64) { k.mu.Lock(); k.bad = n; k.mu.Unlock() }

// Calls are Stop's "detach" and "flush" and each "snapshot", in order.
func (k *Kernel) Calls() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.calls...)
}

// Delivered is how many pushed events the stream has given its sink:
// those the session has received.
func (k *Kernel) Delivered() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.handed
}

// Added are the processes AddPIDs was given.
func (k *Kernel) Added() []uint32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]uint32(nil), k.added...)
}

// Stream delivers what is pushed; after Stop it drains and returns.
func (k *Kernel) Stream(sink func(stall.Event)) error {
	for {
		k.mu.Lock()
		q, stopped := k.queue, k.stopped
		k.queue = nil
		k.mu.Unlock()
		for _, ev := range q {
			sink(ev)
			k.mu.Lock()
			k.handed++
			k.mu.Unlock()
		}
		if stopped && len(q) == 0 {
			return nil
		}
		<-k.wake
	}
}

// Stop detaches (no more events) and flushes the stream.
func (k *Kernel) Stop() error {
	k.mu.Lock()
	k.stopped = true
	k.calls = append(k.calls, "detach", "flush")
	k.mu.Unlock()
	k.poke()
	return nil
}

// Snapshot returns the test's aggregates, with the lost count.
func (k *Kernel) Snapshot() (*stall.Snapshot, error) {
	k.mu.Lock()
	k.calls = append(k.calls, "snapshot")
	lost := k.lost
	k.mu.Unlock()
	s := k.snap()
	s.LostEvents = lost
	return s, nil
}

// LostEvents is the ring buffer's count of dropped events.
func (k *Kernel) LostEvents() (uint64, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lost, nil
}

// AddPIDs notes the processes a rescan found.
func (k *Kernel) AddPIDs(p []uint32) error {
	k.mu.Lock()
	k.added = append(k.added, p...)
	k.mu.Unlock()
	return nil
}

// BadRecords is the count SetBad set.
func (k *Kernel) BadRecords() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.bad
}
