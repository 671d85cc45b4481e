package doctor

import (
	"strings"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// container is what doctor knows of running inside a container, and of
// the target process's own placement by an orchestrator.
type container struct {
	signs []string // why doctor itself looks containerised; none: it is not
	pod   bool     // a Kubernetes pod (service account, kubepods cgroup)
}

func (c container) inside() bool { return len(c.signs) > 0 }

// cgroupMarks name container managers in a cgroup path, on cgroup v1 and
// v2, with the systemd and cgroupfs drivers ("kubepods-burstable-pod…
// .slice", "/kubepods/besteffort/pod…", "docker-….scope", "cri-containerd-…").
var cgroupMarks = []string{"kubepods", "docker", "containerd", "crio", "libpod", "lxc"}

// detectContainer looks for the signs a container leaves. On cgroup v2
// with a private cgroup namespace (the Kubernetes default since 1.25 with
// containerd) /proc/1/cgroup reads "0::/" like a host's, so the cgroup
// root is examined too: only a non-root cgroup has memory.max or cpu.max.
// What it quotes from the machine is escaped.
func detectContainer(m *machine) (container, error) {
	var c container
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if m.fs.Exists(f) {
			c.signs = append(c.signs, f+" exists")
		}
	}
	cgs, err := readCgroups(m.fs, "proc/1/cgroup")
	if err != nil && !hostfs.Absent(err) {
		return c, err
	}
	for _, cg := range cgs {
		if mark := cgroupMark(cg.line); mark != "" {
			c.signs = append(c.signs, "/proc/1/cgroup: "+sanitize.Text(strings.TrimSpace(cg.line)))
			c.pod = c.pod || mark == "kubepods"
			break
		}
	}
	if len(cgs) == 1 && cgs[0].hierarchy == 0 && cgs[0].path == "/" {
		for _, f := range []string{"memory.max", "cpu.max"} {
			if m.fs.Exists("sys/fs/cgroup/" + f) {
				c.signs = append(c.signs, "/sys/fs/cgroup/"+f+" exists with /proc/1/cgroup = 0::/: a private cgroup namespace (only a non-root cgroup has "+f+")")
				break
			}
		}
	}
	for _, f := range []string{"/var/run/secrets/kubernetes.io/serviceaccount/namespace", "/run/secrets/kubernetes.io/serviceaccount/namespace"} {
		s, err := m.fs.ReadValue(f)
		if hostfs.Absent(err) {
			continue
		}
		if err != nil {
			return c, err
		}
		c.signs = append(c.signs, f+" = "+sanitize.Text(s))
		c.pod = true
		break
	}
	return c, nil
}

// cgroupMark is the container manager a cgroup line names, "" if none.
func cgroupMark(line string) string {
	for _, mark := range cgroupMarks {
		if strings.Contains(line, mark) {
			return mark
		}
	}
	return ""
}

// inPod tells whether placement advice must go through the kubelet: doctor
// runs in a pod, or the target process's cgroup is a pod's.
func inPod(m *machine, p *process) bool {
	return m.container.pod || (p != nil && strings.Contains(p.cgroupPath, "kubepods"))
}

// podPlacement is the fix for a placement finding when the process is in a
// Kubernetes pod. Seed 000 (补遗三, 六): numactl in a pod fights the
// scheduler and can bind memory against the pod's cpuset; the kubelet's
// Topology Manager places CPUs and memory on one node together.
const (
	podPlacementFix = "let the kubelet place the pod: a Guaranteed pod (requests = limits, integer CPUs) on a node whose kubelet runs " +
		"topologyManagerPolicy: single-numa-node (or restricted), cpuManagerPolicy: static and memoryManagerPolicy: Static. " +
		"numactl in the pod's command works only within the cpuset the kubelet gave it, and the scheduler does not know of it (in one incident, " +
		"it bound memory against the pod's CPUs)"
	podPlacementPersist = "the node's kubelet configuration (KubeletConfiguration: topologyManagerPolicy, cpuManagerPolicy, memoryManagerPolicy, reservedMemory); " +
		"check the result in the pod: cpuset.cpus.effective and cpuset.mems.effective name the same node"
)

// hostWide are the checks whose knobs belong to the host: from inside a
// container they change every tenant, or fail.
var hostWide = map[string]bool{
	"zone_reclaim_mode": true, "thp_defrag": true, "numa_balancing": true, "numa_balancing_thrash": true,
	"hugepage_reservation": true, "hugepage_starvation": true, "watermark_scale_factor": true,
	"min_free_kbytes": true, "nic_irq_affinity": true,
}

// adviseForContainers rewrites fixes that would be wrong from where the
// process runs: host knobs are set on the node, and a pod is placed by
// the kubelet rather than by numactl.
func adviseForContainers(m *machine, p *process, f *Finding) {
	switch {
	case m.container.inside() && hostWide[f.Check]:
		f.Fix = "on the node (host), not from this container: " + f.Fix
		f.Persist = "in the node image or its provisioning (these settings are host-wide): " + f.Persist
	case placement[f.Check] && inPod(m, p):
		f.Fix, f.Persist = podPlacementFix, podPlacementPersist
		f.TradeOff += " In a pod, single-numa-node leaves a pod Pending when no node fits it on one NUMA node; best-effort never refuses but does not guarantee alignment."
	}
}

// placement are the checks whose fix binds a process to nodes.
var placement = map[string]bool{"remote_memory": true, "binding": true, "node_saturation": true, "interleave": true,
	"cross_node_alloc": true, "node_pressure": true}

// 15. Inside a container the knobs are the host's.
func checkContainer(m *machine, _ *process) ([]Finding, string) {
	if !m.container.inside() {
		return nil, ""
	}
	what := "a container"
	if m.container.pod {
		what = "a Kubernetes pod"
	}
	return []Finding{{Severity: Info,
		Title:    "running inside " + what + ": zone_reclaim_mode, THP, NUMA balancing, huge pages and IRQ affinity belong to the host",
		Evidence: m.container.signs,
		Why: "These settings are host-wide; changing them from a container changes every tenant, or fails (in one incident, zone_reclaim_mode set from a pod " +
			"made every neighbour stall). Process placement in a pod is the kubelet's job: numactl in the pod fights it.",
		TradeOff: "Fix host settings on the node (or its image). For placement use the kubelet's Topology Manager with the static CPU Manager " +
			"and Memory Manager instead of numactl in the pod.",
	}}, ""
}
