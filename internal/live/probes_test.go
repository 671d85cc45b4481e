//go:build linux

package live

import (
	"errors"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/tracer"
)

// probes' text fits 100 columns with the longest names, details and
// tracepoint lists, and keeps every word of them whole.
func TestProbesTextFits(t *testing.T) {
	probes := []stall.ProbeStatus{
		{Name: "memcg_softlimit_reclaim", Attached: true, Description: "memcg soft-limit reclaim (counted as memcg_reclaim)",
			Tracepoints: []string{"mm_vmscan_memcg_softlimit_reclaim_begin", "mm_vmscan_memcg_softlimit_reclaim_end"}},
		{Name: "runq_wait", Attached: true, Tracepoints: []string{"sched_switch"},
			Description: "time a traced thread waited for a CPU once woken or preempted, from the scheduler's own run-queue times (sched_info); only with a latency source and a target"},
		{Name: "compaction", Error: "program compaction_begin: load: permission denied (a verifier log of 120 lines follows in the JSON)",
			Tracepoints: []string{"mm_compaction_try_to_compact_pages", "mm_compaction_begin", "mm_compaction_end"}},
	}
	features := []tracer.Feature{{Name: "fexit", Detail: "fexit/try_to_compact_pages does not load (EPERM); stall boundaries come from tracepoints, which every supported kernel has"}}
	sockets := tracer.SocketTiming{Err: errors.New("tcp_probe: load: invalid argument, and the fallback on the syscalls did not load either: permission denied"),
		Hooks: []tracer.SockreqHook{{Tracepoint: "inet_sock_set_state", Why: "a connection is born, or closes (its last exchange), which ends the request that was open on it"}}}
	var b strings.Builder
	writeProbes(&b, "6.18.0", probes, features, sockets)
	out := b.String()
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 100 {
			t.Errorf("a line of %d columns: %q", len(line), line)
		}
	}
	words := strings.Fields(strings.Join([]string{probes[1].Description, probes[2].Error, features[0].Detail, sockets.Err.Error(), sockets.Hooks[0].Why}, " "))
	for _, p := range probes {
		words = append(words, p.Tracepoints...)
	}
	for _, w := range words {
		if !strings.Contains(out, strings.TrimSuffix(w, ",")) {
			t.Errorf("%q is missing or cut:\n%s", w, out)
		}
	}
	if !strings.Contains(out, "compaction               FAILED    program compaction_begin") {
		t.Errorf("the failed probe's row:\n%s", out)
	}
}
