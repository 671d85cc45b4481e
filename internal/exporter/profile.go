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
// ProfileSeconds, each of at most profileRows rows. maxProfiles are built
// at once at most: one of the whole span copies and merges 600 tables,
// some hundreds of MB and seconds of CPU at the most.
const (
	ProfileSeconds        = 600
	DefaultProfileSeconds = 30
	profileRows           = 1 << 14
	maxProfiles           = 2
)

// ProfileHelp says what the stall profile's endpoint answers, for serve's
// help and its index page. It is the past N seconds, answered at once,
// where Go's /debug/pprof/profile?seconds=N waits and records the next N:
// serve has kept them already, a scrape every N seconds still gets every
// second, and no request holds a connection for up to ten minutes.
var ProfileHelp = fmt.Sprintf("GET /debug/pprof/stalls?seconds=N (N from 1 to %d, %d by default) is the stall profile of the past N seconds, sent at once: Go's /debug/pprof/profile?seconds=N waits and records the next N seconds instead",
	ProfileSeconds, DefaultProfileSeconds)

// recentStacks keeps the last ProfileSeconds of streamed stalls by
// cause, thread and stack, a table per second of CLOCK_MONOTONIC, for
// GET /debug/pprof/stalls?seconds=N.
type recentStacks struct {
	// mu is taken for every streamed stall: a profile holds it only to
	// copy one second's rows, and merges, sorts and encodes them without.
	mu   sync.Mutex
	secs [ProfileSeconds]stackSecond // a ring, by second
	now  func() uint64               // CLOCK_MONOTONIC in ns
	// copied, if set, is called after each second a profile copies, the
	// lock given back: tests hold a profile there.
	copied func()
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
	m := newProfileMerge()
	var rows []aggregate.StackSample
	var dropped uint64
	for i := range seconds {
		if uint64(i) > nowSec {
			break
		}
		var d uint64
		rows, d = r.second(nowSec-uint64(i), rows[:0])
		dropped += d
		if r.copied != nil {
			r.copied()
		}
		m.add(rows)
	}
	return m.samples(), dropped
}

// second appends the rows of second sec to dst, and how many stalls its
// full table left out: all a profile does under the lock.
func (r *recentStacks) second(sec uint64, dst []aggregate.StackSample) ([]aggregate.StackSample, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &r.secs[sec%ProfileSeconds]
	if b.sec != sec+1 {
		return dst, 0
	}
	return b.table.AppendRows(dst), b.dropped
}

// profileMerge adds the seconds' rows of one cause, thread and stack up.
type profileMerge struct {
	names map[uint32]*aggregate.ProcessName
	at    map[profileRowKey]int // in out
	out   []aggregate.StackSample
}

type profileRowKey struct {
	cause stall.Cause
	tid   uint32
	stack string
}

func newProfileMerge() *profileMerge {
	return &profileMerge{names: map[uint32]*aggregate.ProcessName{}, at: map[profileRowKey]int{}}
}

func (m *profileMerge) add(rows []aggregate.StackSample) {
	for _, s := range rows {
		n := m.names[s.PID]
		if n == nil {
			n = &aggregate.ProcessName{}
			m.names[s.PID] = n
		}
		n.Offer(s.PID, s.TID, s.Comm)
		k := profileRowKey{s.Cause, s.TID, s.Stack.Key()}
		if i, ok := m.at[k]; ok {
			m.out[i].Count += s.Count
			m.out[i].Ns += s.Ns
			continue
		}
		m.at[k] = len(m.out)
		m.out = append(m.out, s)
	}
}

// samples are the merged rows, named and sorted as a table's Samples are.
func (m *profileMerge) samples() []aggregate.StackSample {
	for i := range m.out {
		m.out[i].Process = m.names[m.out[i].PID].String()
	}
	aggregate.SortStackSamples(m.out)
	return m.out
}

// serveStallProfile answers GET /debug/pprof/stalls?seconds=N with the
// stall profile of the past N seconds (30 by default), at once (see
// ProfileHelp), in the gzipped profile.proto Go's /debug/pprof/profile
// serves a CPU profile in. Past maxProfiles being built, a request is
// turned away at once.
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
	select {
	case e.profiling <- struct{}{}:
		defer func() { <-e.profiling }()
	default:
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("%d stall profiles are being built, the most at once: try again shortly", maxProfiles),
			http.StatusTooManyRequests)
		return
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
