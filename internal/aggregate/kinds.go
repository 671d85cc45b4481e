package aggregate

import (
	"cmp"

	"github.com/numatrace/numatrace/internal/stall"
)

// KindTimes are the streamed stall time of each kind of wait of the
// causes that have kinds (stall.Event.WaitKind: memstall_wait's
// thrashing, memory_high, swap_in): which kind a cause mostly was, in a
// thread, a process or the run. The report's tables, its headline and
// the view name a cause with that kind; the zero value is empty.
type KindTimes struct {
	ns map[kindKey]uint64
}

type kindKey struct {
	cause stall.Cause
	kind  string
}

// Add counts ev's time under its kind, if its cause has kinds.
func (k *KindTimes) Add(ev *stall.Event) {
	kind := ev.WaitKind()
	if kind == "" {
		return
	}
	if k.ns == nil {
		k.ns = map[kindKey]uint64{}
	}
	k.ns[kindKey{ev.Cause, kind}] += ev.DurNs
}

// Merge adds o's times to k.
func (k *KindTimes) Merge(o *KindTimes) {
	if len(o.ns) == 0 {
		return
	}
	if k.ns == nil {
		k.ns = map[kindKey]uint64{}
	}
	for key, ns := range o.ns {
		k.ns[key] += ns
	}
}

// Main is the kind of wait that was most of the cause's time (of two
// alike, the first by name, so that the choice never depends on map
// order); "" for a cause without kinds, or none streamed.
func (k *KindTimes) Main(c stall.Cause) string {
	var main string
	var most uint64
	for key, ns := range k.ns {
		if key.cause == c && (ns > most || ns == most && cmp.Less(key.kind, main)) {
			main, most = key.kind, ns
		}
	}
	return main
}

// name sets each cause's Kind in sums to k's main kind.
func (k *KindTimes) name(sums *CauseSummaries) {
	if len(k.ns) == 0 {
		return
	}
	for c := range sums {
		sums[c].Kind = k.Main(stall.Cause(c))
	}
}
