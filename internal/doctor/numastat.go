package doctor

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/numatrace/numatrace/internal/numamaps"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/topology"
)

// Numastat is a process's memory per node by kind, in MiB: the numastat -p
// table, with the share of its accesses that are remote.
type Numastat struct {
	Nodes []int                         `json:"nodes"`
	Rows  map[string]map[string]float64 `json:"mib"` // kind → "N0".. → MiB
	Total map[string]float64            `json:"total_mib"`
	// Remote is null when where the threads run was not measured (Basis
	// says why): it would only restate an assumption.
	Remote *float64 `json:"remote_share"`
	// CPUNodes are the nodes of Cpus_allowed_list.
	CPUNodes []int `json:"cpu_nodes"`
	// ThreadNodes is the share of the process's CPU time per node its
	// threads ran on; Remote weighs the pages per node by it, so for an
	// unbound process it is not 0 by definition.
	ThreadNodes map[string]float64 `json:"thread_nodes,omitempty"`
	Basis       string             `json:"remote_basis"`
	// byBinding: ThreadNodes come from the allowed CPUs (all on one
	// node), not from the threads' CPU time.
	byBinding bool
}

const pagesPerMiB = 1024 / numamaps.BasePageKB

func numastat(m *machine, p *process) *Numastat {
	ns := &Numastat{Nodes: append([]int(nil), m.nodes...), Rows: map[string]map[string]float64{}, Total: map[string]float64{}}
	if len(ns.Nodes) == 0 {
		ns.Nodes = []int{0}
	}
	byKind := p.maps.Kinds
	for k := numamaps.Kind(0); k < numamaps.NumKinds; k++ {
		row := map[string]float64{}
		for _, n := range ns.Nodes {
			mib := float64(byKind[k][n]) / pagesPerMiB // a kind with no pages reads 0
			row[fmt.Sprintf("N%d", n)] = mib
			ns.Total[fmt.Sprintf("N%d", n)] += mib
		}
		ns.Rows[k.String()] = row
	}
	threads, basis := threadNodes(m, p, m.span)
	if !basis.measured {
		ns.Basis = basis.text
	} else {
		remote, _ := remoteEstimate(p, threads)
		ns.Remote = &remote
		ns.Basis = "pages per node weighed by " + basis.text + " per node, assuming every thread uses all of the memory alike"
		ns.byBinding = basis.byBinding
	}
	if basis.measured && len(threads) > 0 {
		ns.ThreadNodes = map[string]float64{}
		for n, w := range threads {
			ns.ThreadNodes[fmt.Sprintf("N%d", n)] = w
		}
	}
	for n := range p.cpuNodes {
		ns.CPUNodes = append(ns.CPUNodes, n)
	}
	sort.Ints(ns.CPUNodes)
	return ns
}

// Write prints the table as numastat -p does, plus the remote share.
func (ns *Numastat) Write(w io.Writer, pid int, comm string) {
	fmt.Fprintf(w, "Per-node process memory usage (in MiB) for PID %d (%s)\n", pid, sanitize.Text(comm))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{""}
	for _, n := range ns.Nodes {
		head = append(head, fmt.Sprintf("Node %d", n))
	}
	head = append(head, "Total")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	row := func(name string, vals map[string]float64) {
		cells := []string{name}
		var sum float64
		for _, n := range ns.Nodes {
			v := vals[fmt.Sprintf("N%d", n)]
			sum += v
			cells = append(cells, fmt.Sprintf("%.2f", v))
		}
		cells = append(cells, fmt.Sprintf("%.2f", sum))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	for k := numamaps.Kind(0); k < numamaps.NumKinds; k++ {
		row(strings.ToUpper(k.String()[:1])+k.String()[1:], ns.Rows[k.String()])
	}
	row("Total", ns.Total)
	tw.Flush()
	var where []string
	for _, n := range ns.Nodes {
		if share, ok := ns.ThreadNodes[fmt.Sprintf("N%d", n)]; ok && share > 0 {
			where = append(where, fmt.Sprintf("node %d %.0f%%", n, 100*share))
		}
	}
	if len(where) == 0 || ns.Remote == nil {
		fmt.Fprintf(w, "Remote accesses: %s\n", ns.Basis)
		return
	}
	if ns.byBinding {
		fmt.Fprintf(w, "Threads: on node(s) %s, the only node(s) of its allowed CPUs (their CPU time is not measured)\n", topology.FormatList(ns.CPUNodes))
	} else {
		fmt.Fprintf(w, "Threads' CPU time: %s (CPUs allowed on node(s) %s)\n", strings.Join(where, ", "), topology.FormatList(ns.CPUNodes))
	}
	fmt.Fprintf(w, "Remote accesses, estimated: %.1f%%\n", *ns.Remote*100)
}
