// Package stackexport writes the stacks of stalled threads in the formats
// profilers read: a pprof profile.proto for `go tool pprof` and Parca, and
// Brendan Gregg's folded stacks for flamegraph.pl and speedscope.
//
// In both, the kernel stack sits on top of the user stack, as perf shows
// it: the user code called into the kernel, and the kernel is where the
// thread waited.
package stackexport

import (
	"fmt"
	"io"
	"time"

	"github.com/google/pprof/profile"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/stall"
)

// noStack names the one frame of a sample without a stack, so its time
// still shows in the profile.
const noStack = "[no stack]"

// framelessName names the one frame of a sample whose stack has none: a
// stack left out by a bound by its note, saying which, others noStack.
func framelessName(s *stall.Stack) string {
	if s.LeftOut() {
		return "[" + s.Note + "]"
	}
	return noStack
}

// WritePprof writes samples as a gzipped pprof profile covering dur from
// start, with two values per sample: its stalls and their time. comments
// go in the profile as they are (what it leaves out).
func WritePprof(w io.Writer, samples []aggregate.StackSample, start time.Time, dur time.Duration, comments ...string) error {
	b := newPprofBuilder()
	for i := range samples {
		b.add(&samples[i])
	}
	p := b.profile(start, dur)
	p.Comments = comments
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("pprof profile: %w", err)
	}
	if err := p.Write(w); err != nil {
		return fmt.Errorf("write pprof profile: %w", err)
	}
	return nil
}

// pprofBuilder interns mappings, functions and locations, so the samples
// that share a frame share its location.
type pprofBuilder struct {
	samples   []*profile.Sample
	mappings  map[mappingKey]*profile.Mapping
	functions map[functionKey]*profile.Function
	locations map[locationKey]*profile.Location
	// in first-seen order, for a profile that is the same on every run
	mappingList  []*profile.Mapping
	functionList []*profile.Function
	locationList []*profile.Location
}

// mappingKey keeps a kernel module and a file of the same name apart:
// their addresses mean different things.
type mappingKey struct {
	module string
	kernel bool
}

type functionKey struct {
	name, module string
}

type locationKey struct {
	mapping mappingKey
	address uint64
	name    string
}

func newPprofBuilder() *pprofBuilder {
	return &pprofBuilder{
		mappings:  make(map[mappingKey]*profile.Mapping),
		functions: make(map[functionKey]*profile.Function),
		locations: make(map[locationKey]*profile.Location),
	}
}

func (b *pprofBuilder) add(s *aggregate.StackSample) {
	var locs []*profile.Location
	if s.Stack != nil {
		// The user frames are interned first: the profile's first
		// mapping, which pprof names as its file, is then the program's.
		user := make([]*profile.Location, 0, len(s.Stack.User))
		for _, f := range s.Stack.User {
			user = append(user, b.location(f, false))
		}
		locs = make([]*profile.Location, 0, len(s.Stack.Kernel)+len(user))
		for _, f := range s.Stack.Kernel {
			locs = append(locs, b.location(f, true))
		}
		locs = append(locs, user...)
	}
	if len(locs) == 0 {
		locs = append(locs, b.location(stall.Frame{Func: framelessName(s.Stack)}, false))
	}
	b.samples = append(b.samples, &profile.Sample{
		Location: locs,
		Value:    []int64{int64(s.Count), int64(s.Ns)},
		// any process can set its names; pprof shows them in a terminal
		Label: map[string][]string{
			"cause":   {s.Cause.String()},
			"thread":  {sanitize.Text(s.Comm)},
			"process": {sanitize.Text(s.Process)},
		},
		NumLabel: map[string][]int64{
			"pid": {int64(s.PID)},
			"tid": {int64(s.TID)},
		},
	})
}

// location is f's interned location. A kernel frame keeps its address; a
// user frame's address is its offset in the file, which another machine
// reads the same, with its mapping starting at 0.
func (b *pprofBuilder) location(f stall.Frame, kernel bool) *profile.Location {
	mk := mappingKey{module: f.Module, kernel: kernel}
	addr := f.Offset
	if kernel {
		addr = f.Addr
	}
	lk := locationKey{mapping: mk, address: addr, name: f.Name()}
	if loc, ok := b.locations[lk]; ok {
		return loc
	}
	loc := &profile.Location{
		ID:      uint64(len(b.locationList) + 1),
		Mapping: b.mapping(mk, f.BuildID, addr),
		Address: addr,
		Line:    []profile.Line{{Function: b.function(lk.name, f.Module)}},
	}
	b.locations[lk] = loc
	b.locationList = append(b.locationList, loc)
	return loc
}

// mapping is the module's interned mapping, widened to cover addr; nil
// for a frame whose module is unknown.
func (b *pprofBuilder) mapping(k mappingKey, buildID string, addr uint64) *profile.Mapping {
	if k.module == "" {
		return nil
	}
	m, ok := b.mappings[k]
	if !ok {
		start := uint64(0) // a user address is already a file offset
		if k.kernel {
			start = addr
		}
		m = &profile.Mapping{
			ID:      uint64(len(b.mappingList) + 1),
			Start:   start,
			File:    k.module,
			BuildID: buildID,
			// names come resolved: pprof must not look for the binary
			HasFunctions: true,
		}
		b.mappings[k] = m
		b.mappingList = append(b.mappingList, m)
	}
	m.Start = min(m.Start, addr)
	m.Limit = max(m.Limit, addr+1)
	return m
}

func (b *pprofBuilder) function(name, module string) *profile.Function {
	k := functionKey{name: name, module: module}
	if fn, ok := b.functions[k]; ok {
		return fn
	}
	shown := sanitize.Text(name)
	fn := &profile.Function{
		ID:         uint64(len(b.functionList) + 1),
		Name:       shown,
		SystemName: shown,
	}
	b.functions[k] = fn
	b.functionList = append(b.functionList, fn)
	return fn
}

func (b *pprofBuilder) profile(start time.Time, dur time.Duration) *profile.Profile {
	return &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "stalls", Unit: "count"},
			{Type: "stall_time", Unit: "nanoseconds"},
		},
		DefaultSampleType: "stall_time",
		Sample:            b.samples,
		Mapping:           b.mappingList,
		Location:          b.locationList,
		Function:          b.functionList,
		TimeNanos:         start.UnixNano(),
		DurationNanos:     dur.Nanoseconds(),
		PeriodType:        &profile.ValueType{Type: "stall_time", Unit: "nanoseconds"},
		Period:            1,
	}
}
