// Package kubecg finds a Kubernetes pod's or container's cgroup on this
// node from what the node itself holds, with no API client: the kubelet's
// cgroup tree (cgroupfs or systemd driver, cgroup v1 or v2, any QoS
// class, under any --cgroup-root) and, to name pods, the container
// runtime's state (containerd, CRI-O, Docker), whose containers carry
// their pod's namespace, name and UID.
package kubecg

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Node is where a node keeps cgroups and container runtime state.
type Node struct {
	CgroupRoot string // /sys/fs/cgroup
	// StateRoots hold the runtime's per-container state: each directory
	// below one is a container with its OCI config.json (containerd,
	// CRI-O) or Docker's config.v2.json.
	StateRoots []string
}

// Host is this node as the kubelet and the usual runtimes lay it out.
var Host = Node{
	CgroupRoot: "/sys/fs/cgroup",
	StateRoots: []string{
		"/run/containerd/io.containerd.runtime.v2.task/k8s.io", // containerd
		"/run/containers/storage/overlay-containers",           // CRI-O: <id>/userdata/config.json
		"/var/lib/docker/containers",                           // cri-dockerd
	},
}

// ErrNotFound: no such pod or container on this node.
var ErrNotFound = errors.New("not found")

// Pod is a pod's cgroup on this node.
type Pod struct {
	UID       string
	Namespace string // "" when no runtime state names it
	Name      string
	QoS       string // guaranteed, burstable or besteffort
	Dir       string // its cgroup directory, in the hierarchy numatrace follows
}

// String names the pod for reports and errors.
func (p Pod) String() string {
	if p.Name == "" {
		return "pod " + p.UID
	}
	return "pod " + p.Namespace + "/" + p.Name
}

// Container is one container's cgroup.
type Container struct {
	ID  string
	Pod Pod
	Dir string
}

// uid is a pod UID: a dashed UUID from the API server, or a static pod's
// 32-hex-digit hash; systemd slice names carry the dashes as underscores.
const uid = `[0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12}|[0-9a-fA-F]{32}`

var (
	// A pod's directory: pod<uid> (cgroupfs), or [ROOT-]kubepods[-qos]-pod<uid>.slice
	// (systemd; the kubelet prefixes a --cgroup-root to every slice name).
	podDir = regexp.MustCompile(`^(?:[a-z0-9_.]+(?:-[a-z0-9_.]+)*-)?pod(` + uid + `)(?:\.slice)?$`)
	// A container's directory in its pod's: the bare id (cgroupfs) or
	// <runtime>-<id>.scope (systemd). CRI-O's conmon is not the container.
	containerDir = regexp.MustCompile(`^(?:(?:cri-containerd|crio|docker|cri-o)-)?([0-9a-f]{64})(?:\.scope)?$`)
	uidRef       = regexp.MustCompile(`^(?:` + uid + `)$`)
)

// hierarchy is the cgroup tree to search: v2's root, or on v1 the
// memory controller's (every pod has one there).
func (n Node) hierarchy() (string, error) {
	if _, err := os.Stat(filepath.Join(n.CgroupRoot, "cgroup.controllers")); err == nil {
		return n.CgroupRoot, nil
	}
	for _, c := range []string{"memory", "pids", "cpu,cpuacct", "cpu", "systemd", "unified"} {
		dir := filepath.Join(n.CgroupRoot, c)
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no cgroup hierarchy under %s", n.CgroupRoot)
}

// maxDepth bounds the walk for pods: kubepods/qos/pod is 3 deep, a
// --cgroup-root or a systemd slice adds a level or two.
const maxDepth = 6

// Pods lists the pods with a cgroup on this node, named where the
// runtime's state names them, sorted by namespace, name and UID.
func (n Node) Pods() ([]Pod, error) {
	root, err := n.hierarchy()
	if err != nil {
		return nil, err
	}
	names := n.podNames()
	var pods []Pod
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		if strings.Count(strings.TrimPrefix(path, root), "/") > maxDepth {
			return fs.SkipDir
		}
		m := podDir.FindStringSubmatch(d.Name())
		if m == nil {
			return nil
		}
		uid := strings.ToLower(strings.ReplaceAll(m[1], "_", "-"))
		p := Pod{UID: uid, Dir: path, QoS: qosOf(d.Name(), filepath.Base(filepath.Dir(path)))}
		if id, ok := names[uid]; ok {
			p.Namespace, p.Name = id.namespace, id.name
		}
		pods = append(pods, p)
		return fs.SkipDir // containers are listed from the pod
	})
	if err != nil {
		return nil, fmt.Errorf("read cgroups under %s: %w", root, err)
	}
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if a.Namespace+"/"+a.Name != b.Namespace+"/"+b.Name {
			return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
		}
		return a.UID < b.UID
	})
	return pods, nil
}

// qosOf reads the QoS class from the pod directory's own name (systemd:
// kubepods-burstable-pod<uid>.slice) or its parent's (cgroupfs:
// kubepods/burstable/pod<uid>).
func qosOf(name, parent string) string {
	switch {
	case strings.Contains(name, "-burstable-pod"):
		return "burstable"
	case strings.Contains(name, "-besteffort-pod"):
		return "besteffort"
	case parent == "burstable" || strings.HasSuffix(parent, "-burstable.slice"):
		return "burstable"
	case parent == "besteffort" || strings.HasSuffix(parent, "-besteffort.slice"):
		return "besteffort"
	}
	return "guaranteed"
}

// FindPod resolves ref: NAMESPACE/NAME, a NAME found in one namespace
// only, or the pod's UID.
func (n Node) FindPod(ref string) (Pod, error) {
	pods, err := n.Pods()
	if err != nil {
		return Pod{}, err
	}
	var match []Pod
	ns, name, qualified := strings.Cut(ref, "/")
	byUID := uidRef.MatchString(ref)
	for _, p := range pods {
		switch {
		case byUID:
			if p.UID == strings.ToLower(ref) {
				match = append(match, p)
			}
		case qualified:
			if p.Namespace == ns && p.Name == name {
				match = append(match, p)
			}
		case p.Name == ref:
			match = append(match, p)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return Pod{}, fmt.Errorf("no pod %s on this node (%s): %w", ref, podList(pods), ErrNotFound)
	}
	return Pod{}, fmt.Errorf("pod %s is ambiguous: %s; give NAMESPACE/NAME or the UID", ref, podList(match))
}

// FindContainer resolves a container ID, or a unique prefix of one (as
// `crictl ps` and `docker ps` print 13 and 12 characters).
func (n Node) FindContainer(id string) (Container, error) {
	// As kubectl prints it: containerd://<id>, cri-o://<id>, docker://<id>.
	if _, rest, ok := strings.Cut(id, "://"); ok {
		id = rest
	}
	id = strings.ToLower(id)
	if len(id) < 4 || strings.Trim(id, "0123456789abcdef") != "" {
		return Container{}, fmt.Errorf("container ID %q: want at least 4 hex digits", id)
	}
	pods, err := n.Pods()
	if err != nil {
		return Container{}, err
	}
	var match, all []Container
	for _, p := range pods {
		cs, err := containersOf(p)
		if err != nil {
			continue // the pod went while we looked
		}
		for _, c := range cs {
			all = append(all, c)
			if strings.HasPrefix(c.ID, id) {
				match = append(match, c)
			}
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return Container{}, fmt.Errorf("no container %s on this node (%s): %w", id, containerList(all), ErrNotFound)
	}
	return Container{}, fmt.Errorf("container %s is ambiguous: %s", id, containerList(match))
}

// containersOf lists a pod's containers (its sandbox's too).
func containersOf(p Pod) ([]Container, error) {
	ents, err := os.ReadDir(p.Dir)
	if err != nil {
		return nil, err
	}
	var out []Container
	for _, e := range ents {
		if m := containerDir.FindStringSubmatch(e.Name()); m != nil && e.IsDir() {
			out = append(out, Container{ID: m[1], Pod: p, Dir: filepath.Join(p.Dir, e.Name())})
		}
	}
	return out, nil
}

// maxListed bounds the candidates an error names.
const maxListed = 8

// listed names the first maxListed of items, and how many more there are.
func listed[T any](items []T, name func(T) string) string {
	var s []string
	for i, it := range items {
		if i == maxListed {
			s = append(s, fmt.Sprintf("%d more", len(items)-maxListed))
			break
		}
		s = append(s, name(it))
	}
	return strings.Join(s, ", ")
}

func podList(pods []Pod) string {
	if len(pods) == 0 {
		return "no pod cgroups here"
	}
	named := slices.ContainsFunc(pods, func(p Pod) bool { return p.Name != "" })
	out := "pods here: " + listed(pods, func(p Pod) string {
		if p.Name == "" {
			return p.UID
		}
		return p.Namespace + "/" + p.Name + " (" + p.UID + ")"
	})
	if !named {
		out += "; no container runtime state names them, give the UID"
	}
	return out
}

func containerList(cs []Container) string {
	if len(cs) == 0 {
		return "no container cgroups here"
	}
	return "containers here: " + listed(cs, func(c Container) string { return c.ID[:13] + " in " + c.Pod.String() })
}

type podID struct{ namespace, name string }

// maxStateFile bounds a runtime state file: an OCI config is a few KiB.
const maxStateFile = 4 << 20

// podNames reads each container's pod from the runtime's state: OCI
// annotations (containerd's io.kubernetes.cri.sandbox-*, CRI-O's
// io.kubernetes.pod.*) or Docker labels (io.kubernetes.pod.*).
func (n Node) podNames() map[string]podID {
	out := map[string]podID{}
	for _, root := range n.StateRoots {
		ents, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range ents {
			for _, f := range []string{"config.json", "userdata/config.json", "config.v2.json"} {
				if uid, id, ok := readPodID(filepath.Join(root, e.Name(), f)); ok {
					out[uid] = id
					break
				}
			}
		}
	}
	return out
}

func readPodID(path string) (uid string, id podID, ok bool) {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxStateFile {
		return "", id, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", id, false
	}
	var doc struct {
		Annotations map[string]string `json:"annotations"` // OCI runtime spec
		Config      struct {
			Labels map[string]string `json:"Labels"`
		} `json:"Config"` // Docker
	}
	if json.Unmarshal(b, &doc) != nil {
		return "", id, false
	}
	for _, kv := range []map[string]string{doc.Annotations, doc.Config.Labels} {
		for _, keys := range [][3]string{
			{"io.kubernetes.cri.sandbox-uid", "io.kubernetes.cri.sandbox-namespace", "io.kubernetes.cri.sandbox-name"},
			{"io.kubernetes.pod.uid", "io.kubernetes.pod.namespace", "io.kubernetes.pod.name"},
		} {
			if kv[keys[0]] != "" && kv[keys[2]] != "" {
				return strings.ToLower(kv[keys[0]]), podID{namespace: kv[keys[1]], name: kv[keys[2]]}, true
			}
		}
	}
	return "", id, false
}
