package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/numatrace/numatrace/internal/topology"
	"github.com/numatrace/numatrace/internal/tracer"
)

func runProbes(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("probes", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	btfPath := fs.String("btf", "", "kernel BTF file (default /sys/kernel/btf/vmlinux)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	topo, err := topology.Read("/sys")
	if err != nil {
		return err
	}
	// Load everything once, including the cgroup-only probe, to report on it.
	tr, err := tracer.Open(tracer.Config{Filter: tracer.FilterPIDs, FollowForks: true,
		Topology: topo, KernelBTF: *btfPath})
	if err != nil {
		return err
	}
	defer tr.Close()
	probes, features := tr.Probes(), tr.Features()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{
			"kernel": kernelRelease(), "probes": probes, "features": features})
	}
	attached := 0
	for _, p := range probes {
		if p.Attached {
			attached++
		}
	}
	fmt.Fprintf(stdout, "kernel %s: %d of %d probes attach\n\n", kernelRelease(), attached, len(probes))
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
	fmt.Fprintln(stdout, "\nOptional kernel features:")
	for _, f := range features {
		state := "no"
		if f.Available {
			state = "yes"
		}
		fmt.Fprintf(stdout, "  %-8s %-4s %s\n", f.Name, state, f.Detail)
	}
	return nil
}
