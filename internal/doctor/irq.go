package doctor

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/topology"
)

// nic is a physical network interface and where each of its interrupts
// is delivered.
type nic struct {
	name string
	node int // -1 unknown
	irqs []irq
}

type irq struct {
	num   int
	cpus  []int
	nodes map[int]bool
	file  string // the affinity file read
}

// readNICs finds physical network interfaces (those with a device), their
// node, and per MSI interrupt the CPUs it is delivered to: the effective
// affinity where the kernel shows it (x86 delivers to one CPU of the
// allowed mask), else the allowed mask. Interface names come from the
// machine read and are escaped.
func readNICs(m *machine) ([]nic, error) {
	ents, err := m.fs.ReadDir("sys/class/net")
	if hostfs.Absent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []nic
	for _, e := range ents {
		dev := "sys/class/net/" + e.Name() + "/device"
		if !m.fs.Exists(dev) {
			continue // virtual: lo, bridges, veth
		}
		n := nic{name: sanitize.Text(e.Name()), node: -1}
		// A device without NUMA affinity reads -1.
		if v, ok, err := readInt(m.fs, dev+"/numa_node"); err != nil {
			return nil, err
		} else if ok && v >= 0 && v < maxNodes {
			n.node = int(v)
		}
		irqs, err := m.fs.ReadDir(dev + "/msi_irqs")
		if err != nil && !hostfs.Absent(err) {
			return nil, err
		}
		for _, d := range irqs {
			num, err := strconv.Atoi(d.Name())
			if err != nil || num < 0 {
				continue
			}
			q := irq{num: num, nodes: map[int]bool{}}
			for _, f := range []string{"effective_affinity_list", "smp_affinity_list"} {
				s, err := m.fs.ReadValue(fmt.Sprintf("proc/irq/%d/%s", num, f))
				if hostfs.Absent(err) || (err == nil && s == "") {
					continue
				}
				if err != nil {
					return nil, err
				}
				if q.cpus, err = topology.ParseList(s); err != nil {
					return nil, fmt.Errorf("%s: %w", pathOf(m.fs, fmt.Sprintf("proc/irq/%d/%s", num, f)), err)
				}
				q.file = f
				break
			}
			for _, c := range q.cpus {
				if n, ok := m.cpuNode[c]; ok { // an offline CPU has no node
					q.nodes[n] = true
				}
			}
			if len(q.cpus) > 0 {
				n.irqs = append(n.irqs, q)
			}
		}
		sort.Slice(n.irqs, func(i, j int) bool { return n.irqs[i].num < n.irqs[j].num })
		out = append(out, n)
	}
	return out, nil
}

// 16. NIC interrupts on another node than the process (or the NIC). Seed
// 000 (补遗四): irqbalance moved most of a gateway's queues to node 1; 20 µs
// became 35 µs. Each queue is judged alone: one local queue must not hide
// seven remote ones, since each carries its own share of the flows.
func checkIRQs(m *machine, p *process) ([]Finding, string) {
	if len(m.nodes) < 2 {
		return nil, ""
	}
	nics, err := readNICs(m)
	if err != nil {
		return nil, err.Error()
	}
	if len(nics) == 0 {
		return nil, "no physical network interface with MSI interrupts"
	}
	var out []Finding
	var irqbalance, irqbalanceRead bool
	for _, n := range nics {
		t, ok := irqTargetOf(m, p, n)
		if !ok {
			continue
		}
		remote := remoteIRQs(n, t.nodes)
		// Drivers spread their queues over every CPU by default, so for an
		// unbound service half of them on the other node is the design;
		// most of them there is information. A bound service wants its
		// queues on its node: any queue elsewhere is a warning.
		if len(remote) == 0 || (!t.bound && 2*len(remote) <= len(n.irqs)) {
			continue
		}
		// Only a finding needs to know whether irqbalance runs: that is a
		// scan of every process.
		if !irqbalanceRead {
			var err error
			if irqbalance, err = running(m, "irqbalance"); err != nil {
				return out, "whether irqbalance runs: " + err.Error()
			}
			irqbalanceRead = true
		}
		out = append(out, remoteIRQFinding(m, n, t, remote, irqbalance))
	}
	return out, ""
}

// irqTarget is where a NIC's interrupts should run: on the nodes of the
// bound process, or else on the NIC's node.
type irqTarget struct {
	nodes map[int]bool
	who   string // whose nodes they are
	bound bool   // the process is bound to them
}

// irqTargetOf is n's target; ok is false when neither the process is
// bound nor the NIC's node known.
func irqTargetOf(m *machine, p *process, n nic) (t irqTarget, ok bool) {
	t.nodes, t.bound = map[int]bool{}, p != nil && p.cpuBound(m)
	switch {
	case t.bound:
		t.nodes, t.who = p.cpuNodes, fmt.Sprintf("pid %d", p.pid)
	case n.node >= 0:
		t.nodes[n.node], t.who = true, "the NIC"
	default:
		return t, false
	}
	return t, true
}

// remoteIRQs are n's interrupts that run on none of the nodes in want.
func remoteIRQs(n nic, want map[int]bool) []irq {
	var remote []irq
	for _, q := range n.irqs {
		local := false
		for nd := range q.nodes {
			local = local || want[nd]
		}
		if !local {
			remote = append(remote, q)
		}
	}
	return remote
}

// remoteIRQFinding words n's interrupts that run away from t.
func remoteIRQFinding(m *machine, n nic, t irqTarget, remote []irq, irqbalance bool) Finding {
	sev := Warn
	if !t.bound {
		sev = Info
	}
	var nums []int
	remoteNodes := map[int]bool{}
	e := []string{ev(t.who+" nodes", nodeList(t.nodes)), ev("irqbalance running", irqbalance)}
	if n.node >= 0 {
		e = append(e, ev("/sys/class/net/"+n.name+"/device/numa_node", n.node))
	}
	for _, q := range remote {
		nums = append(nums, q.num)
		for nd := range q.nodes {
			remoteNodes[nd] = true
		}
		e = append(e, ev(fmt.Sprintf("/proc/irq/%d/%s", q.num, q.file), topology.FormatList(q.cpus)+" (node "+nodeList(q.nodes)+")"))
	}
	f := Finding{Severity: sev,
		Title: fmt.Sprintf("%d of %s's %d interrupts run only on node %s, away from %s (node %s)",
			len(remote), n.name, len(n.irqs), nodeList(remoteNodes), t.who, nodeList(t.nodes)),
		Evidence: e,
		Why: "Packets are received into memory and processed on the CPU that takes the interrupt; when that is another node than the consuming " +
			"threads, every packet on those queues crosses the interconnect twice and the socket buffers are remote (in one incident, 20 µs became 35 µs).",
		TradeOff: "Pinning IRQs by hand means irqbalance must leave them alone; with several busy services on different nodes, pick the node of the NIC. " +
			"Queues spread over both nodes suit an unbound service; a service bound to one node wants its NIC's queues there.",
		Fix:     fmt.Sprintf("for i in %s; do echo %s > /proc/irq/$i/smp_affinity_list; done", joinInts(nums, " "), cpuList(m, t.nodes)),
		Persist: "IRQBALANCE_BANNED_CPULIST= in /etc/default/irqbalance (or stop irqbalance on latency-critical hosts), and a unit that sets the affinity at boot"}
	if irqbalance {
		f.TradeOff += " irqbalance is running and will move them back unless told not to."
	}
	return f
}
