//go:build linux

package live

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/numatrace/numatrace/internal/stall"
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
	fmt.Fprintf(stdout, "kernel %s: %d of %d probes attach\n\n", KernelRelease(), stall.Attached(probes), len(probes))
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROBE\tSTATUS\tTRACEPOINTS\tDETAIL")
	for _, p := range probes {
		status, detail := "attached", p.Description
		if !p.Attached {
			status, detail = "FAILED", p.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, status, strings.Join(p.Tracepoints, ","), detail)
	}
	tw.Flush()
	printSocketTiming(stdout, sockets)
	fmt.Fprintln(stdout, "\nOptional kernel features:")
	for _, f := range features {
		state := "no"
		if f.Available {
			state = "yes"
		}
		fmt.Fprintf(stdout, "  %-13s %-4s %s\n", f.Name, state, f.Detail)
	}
	return nil
}

// printSocketTiming says which hooks time requests on the target's
// sockets (--latency kernel, the default for --pid) and whether they load.
func printSocketTiming(w io.Writer, st tracer.SocketTiming) {
	status := "loads"
	if st.Err != nil {
		status = "FAILED: " + st.Err.Error()
	}
	fmt.Fprintf(w, "\nRequest timing on the target's sockets (--latency kernel): %s\n", status)
	for _, h := range st.Hooks {
		fmt.Fprintf(w, "  %-20s %s\n", h.Tracepoint, h.Why)
	}
	if st.Fallback != "" {
		fmt.Fprintf(w, "  fallback: %s\n", st.Fallback)
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
