package exporter

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stackexport"
	"github.com/numatrace/numatrace/internal/stall"
)

// The stall profile serve keeps: one table a second, for the last
// ProfileSeconds, each of at most profileRows rows.
const (
	ProfileSeconds        = 600
	DefaultProfileSeconds = 30
	profileRows           = 1 << 14
)

// recentStacks keeps the last ProfileSeconds of streamed stalls by
// cause, thread and stack, a table per second of CLOCK_MONOTONIC, for
// GET /debug/pprof/stalls?seconds=N.
type recentStacks struct {
	mu   sync.Mutex
	secs [ProfileSeconds]stackSecond // a ring, by second
	now  func() uint64               // CLOCK_MONOTONIC in ns
}

type stackSecond struct {
	sec     uint64 // the second it holds, plus one (0: none)
	table   aggregate.StackTable
	dropped uint64 // stalls not counted: the table was full
}

func newRecentStacks(now func() uint64) *recentStacks {
	r := &recentStacks{now: now}
	for i := range r.secs {
		r.secs[i].table.Unstacked = true
	}
	return r
}

// add counts one streamed stall in the second it ended in.
func (r *recentStacks) add(ev *stall.Event) {
	sec := ev.TsNs / 1e9
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &r.secs[sec%ProfileSeconds]
	switch {
	case b.sec == sec+1:
	case b.sec < sec+1: // a second older than the ring: start it anew
		b.sec, b.dropped = sec+1, 0
		b.table.Reset()
	default:
		return // older than what the ring holds now
	}
	if b.table.Len() >= profileRows {
		b.dropped++
		return
	}
	b.table.Add(ev)
}

// profile is the last seconds' stalls as profile samples, each process
// named after its main thread (or lowest tid), and how many stalls the
// full tables left out.
func (r *recentStacks) profile(seconds int) ([]aggregate.StackSample, uint64) {
	nowSec := r.now() / 1e9
	var merged aggregate.StackTable
	merged.Unstacked = true
	var rows []aggregate.StackSample
	var dropped uint64
	r.mu.Lock()
	for i := range seconds {
		if uint64(i) > nowSec {
			break
		}
		sec := nowSec - uint64(i)
		b := &r.secs[sec%ProfileSeconds]
		if b.sec != sec+1 {
			continue
		}
		rows = append(rows, b.table.Samples(nil)...)
		dropped += b.dropped
	}
	r.mu.Unlock()
	names := map[uint32]*aggregate.ProcessName{}
	type rowKey struct {
		cause stall.Cause
		tid   uint32
		stack string
	}
	at := map[rowKey]int{}
	var out []aggregate.StackSample
	for _, s := range rows {
		n := names[s.PID]
		if n == nil {
			n = &aggregate.ProcessName{}
			names[s.PID] = n
		}
		n.Offer(s.PID, s.TID, s.Comm)
		k := rowKey{s.Cause, s.TID, s.Stack.Key()}
		if i, ok := at[k]; ok {
			out[i].Count += s.Count
			out[i].Ns += s.Ns
			continue
		}
		at[k] = len(out)
		out = append(out, s)
	}
	for i := range out {
		out[i].Process = names[out[i].PID].String()
	}
	aggregate.SortStackSamples(out)
	return out, dropped
}

// serveStallProfile answers GET /debug/pprof/stalls?seconds=N with the
// stall profile of the last N seconds (30 by default), gzipped
// profile.proto as Go's /debug/pprof/profile serves a CPU profile.
func (e *Exporter) serveStallProfile(w http.ResponseWriter, req *http.Request) {
	seconds := DefaultProfileSeconds
	if v := req.URL.Query().Get("seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > ProfileSeconds {
			http.Error(w, fmt.Sprintf("seconds must be a whole number from 1 to %d", ProfileSeconds), http.StatusBadRequest)
			return
		}
		seconds = n
	}
	samples, dropped := e.recent.profile(seconds)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="stalls.pb.gz"`)
	var comments []string
	if dropped > 0 {
		comments = append(comments, fmt.Sprintf("%d stalls left out: over %d distinct stacks in a second", dropped, profileRows))
	}
	d := time.Duration(seconds) * time.Second
	if err := stackexport.WritePprof(w, samples, time.Now().Add(-d), d, comments...); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
