package doctor

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/numatrace/numatrace/internal/numamaps"
)

// Numastat is a process's memory per node by kind, in MiB: the numastat -p
// table, with the share that is remote to the CPUs it may run on.
type Numastat struct {
	Nodes  []int                         `json:"nodes"`
	Rows   map[string]map[string]float64 `json:"mib"` // kind → "N0".. → MiB
	Total  map[string]float64            `json:"total_mib"`
	Remote float64                       `json:"remote_share"`
	// CPUNodes are the nodes of Cpus_allowed_list: "remote" is relative to them.
	CPUNodes []int `json:"cpu_nodes"`
}

const pagesPerMiB = 1024 / numamaps.BasePageKB

func numastat(m *machine, p *process) *Numastat {
	ns := &Numastat{Nodes: append([]int(nil), m.nodes...), Rows: map[string]map[string]float64{}, Total: map[string]float64{}}
	if len(ns.Nodes) == 0 {
		ns.Nodes = []int{0}
	}
	byKind := kindPages(p.maps)
	for k := numamaps.Kind(0); k < numamaps.NumKinds; k++ {
		row := map[string]float64{}
		for _, n := range ns.Nodes {
			mib := float64(byKind[k][n]) / pagesPerMiB // a kind with no pages reads 0
			row[fmt.Sprintf("N%d", n)] = mib
			ns.Total[fmt.Sprintf("N%d", n)] += mib
		}
		ns.Rows[k.String()] = row
	}
	ns.Remote, _, _ = p.remoteShare()
	for n := range p.cpuNodes {
		ns.CPUNodes = append(ns.CPUNodes, n)
	}
	sort.Ints(ns.CPUNodes)
	return ns
}

// Write prints the table as numastat -p does, plus the remote share.
func (ns *Numastat) Write(w io.Writer, pid int, comm string) {
	fmt.Fprintf(w, "Per-node process memory usage (in MiB) for PID %d (%s)\n", pid, comm)
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
	var cpu []string
	for _, n := range ns.CPUNodes {
		cpu = append(cpu, fmt.Sprint(n))
	}
	fmt.Fprintf(w, "Remote to its CPUs' node(s) %s: %.1f%%\n", strings.Join(cpu, ","), ns.Remote*100)
}
