//go:build linux

package live

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/textwrap"
	"github.com/numatrace/numatrace/internal/topology"
	"github.com/numatrace/numatrace/internal/tracer"
	"github.com/numatrace/numatrace/internal/wire"
)

// Probes loads every probe once, including those only a cgroup target or
// a latency source attaches, and says
// which attach on this kernel and why the others do not, with the
// optional kernel features.
// mmapLockVia is --mmap-lock-via: whether the fallback would load is
// then a question numatrace probes answers too.
func Probes(btfPath, mmapLockVia string, asJSON bool, stdout io.Writer) error {
	via, err := parseMmapLockVia("probes", mmapLockVia)
	if err != nil {
		return err
	}
	topo, err := topology.Read("/sys")
	if err != nil {
		return err
	}
	tr, err := tracer.Open(tracer.Config{Filter: tracer.FilterPIDs, FollowForks: true, RunqWait: true, EveryProbe: true,
		Topology: topo, KernelBTF: btfPath, MmapLockVia: via})
	if err != nil {
		return err
	}
	defer tr.Close()
	probes, features, sockets := tr.Probes(), tr.Features(), tr.SocketTiming()
	if asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{
			"kernel": KernelRelease(), "probes": wire.NewProbes(probes), "features": features,
			"request_timing": socketTimingJSON(sockets)})
	}
	writeProbes(stdout, KernelRelease(), probes, features, sockets)
	return nil
}

// probesWidth is the width of probes' text: a table row was 259 columns.
const probesWidth = 100

// writeProbes writes probes' text: a row per probe, its detail and
// tracepoints wrapped under the detail column, then the request timing
// and the optional features.
func writeProbes(w io.Writer, release string, probes []stall.ProbeStatus, features []tracer.Feature, sockets tracer.SocketTiming) {
	fmt.Fprintf(w, "kernel %s: %d of %d probes attach\n\n", release, stall.Attached(probes), len(probes))
	const nameWidth, statusWidth = 24, 9
	detailAt := strings.Repeat(" ", nameWidth+1+statusWidth+1)
	fmt.Fprintf(w, "%-*s %-*s %s\n", nameWidth, "PROBE", statusWidth, "STATUS", "DETAIL AND TRACEPOINTS")
	for _, p := range probes {
		status, detail := "attached", p.Description
		if !p.Attached {
			status, detail = "FAILED", p.Error
		}
		lead := fmt.Sprintf("%-*s %-*s ", nameWidth, p.Name, statusWidth, status)
		fmt.Fprintln(w, textwrap.Indented(lead, detailAt, detail, probesWidth))
		fmt.Fprintln(w, textwrap.Hanging(detailAt+"tracepoints: ", strings.Join(p.Tracepoints, ", "), probesWidth))
	}
	printSocketTiming(w, sockets)
	fmt.Fprintln(w, "\nOptional kernel features:")
	for _, f := range features {
		state := "no"
		if f.Available {
			state = "yes"
		}
		fmt.Fprintln(w, textwrap.Hanging(fmt.Sprintf("  %-13s %-4s ", f.Name, state), f.Detail, probesWidth))
	}
}

// printSocketTiming says which hooks time requests on the target's
// sockets (--latency kernel, the default for --pid) and whether they load.
func printSocketTiming(w io.Writer, st tracer.SocketTiming) {
	status := "loads"
	if st.Err != nil {
		status = "FAILED: " + st.Err.Error()
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, textwrap.Hanging("", "Request timing on the target's sockets (--latency kernel): "+status, probesWidth))
	for _, h := range st.Hooks {
		fmt.Fprintln(w, textwrap.Hanging(fmt.Sprintf("  %-20s ", h.Tracepoint), h.Why, probesWidth))
	}
	if st.Fallback != "" {
		fmt.Fprintln(w, textwrap.Hanging("  fallback: ", st.Fallback, probesWidth))
	}
}

func socketTimingJSON(st tracer.SocketTiming) map[string]any {
	var hooks []string
	for _, h := range st.Hooks {
		hooks = append(hooks, h.Tracepoint)
	}
	out := map[string]any{"hooks": hooks, "loads": st.Err == nil}
	if st.Fallback != "" {
		out["fallback"] = st.Fallback
	}
	if st.Err != nil {
		out["error"] = st.Err.Error()
	}
	return out
}
