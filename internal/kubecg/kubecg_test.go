package kubecg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	uidWeb   = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
	uidDB    = "6fa459ea-ee8a-3ca4-894e-db77e160355e"
	uidCache = "0f8fad5b-d9cb-469f-a165-70867728950e"
	uidOther = "7c9e6679-7425-40de-944b-e07fc1f90ae7" // web in another namespace
)

func cid(n int) string { return strings.Repeat(fmt.Sprintf("%x", n%16), 64) }

// A pod as the kubelet lays it out: its QoS class, its containers, and
// (from the runtime) its namespace and name.
type fixturePod struct {
	uid, namespace, name, qos string
	containers                []string
}

var fixturePods = []fixturePod{
	{uidWeb, "shop", "web", "burstable", []string{cid(1), cid(2)}},
	{uidDB, "shop", "db", "guaranteed", []string{cid(3)}},
	{uidCache, "shop", "cache", "besteffort", []string{cid(4)}},
	{uidOther, "staging", "web", "burstable", []string{cid(5)}},
}

// layout writes the cgroup directories of fixturePods under root as one
// kubelet configuration lays them out, and returns the hierarchy dir.
func layout(t *testing.T, root string, v2, systemd bool, runtime string) string {
	t.Helper()
	h := root
	if v2 {
		touch(t, filepath.Join(root, "cgroup.controllers"))
	} else {
		h = filepath.Join(root, "memory")
		touch(t, filepath.Join(h, "cgroup.procs"))
		touch(t, filepath.Join(root, "pids", "cgroup.procs"))
	}
	for _, p := range fixturePods {
		var dir string
		if systemd {
			u := strings.ReplaceAll(p.uid, "-", "_")
			dir = filepath.Join(h, "kubepods.slice")
			if p.qos == "guaranteed" {
				dir = filepath.Join(dir, "kubepods-pod"+u+".slice")
			} else {
				dir = filepath.Join(dir, "kubepods-"+p.qos+".slice", "kubepods-"+p.qos+"-pod"+u+".slice")
			}
		} else {
			dir = filepath.Join(h, "kubepods")
			if p.qos != "guaranteed" {
				dir = filepath.Join(dir, p.qos)
			}
			dir = filepath.Join(dir, "pod"+p.uid)
		}
		for _, c := range p.containers {
			name := c
			if systemd {
				name = runtime + "-" + c + ".scope"
			}
			touch(t, filepath.Join(dir, name, "cgroup.procs"))
		}
		if systemd && runtime == "crio" {
			touch(t, filepath.Join(dir, "crio-conmon-"+p.containers[0]+".scope", "cgroup.procs"))
		}
	}
	return h
}

// runtimeState writes each pod's containers' state as runtime keeps it.
func runtimeState(t *testing.T, root, runtime string) {
	t.Helper()
	for _, p := range fixturePods {
		for _, c := range p.containers {
			switch runtime {
			case "cri-containerd":
				write(t, filepath.Join(root, c, "config.json"), fmt.Sprintf(`{"ociVersion":"1.1.0","annotations":{
"io.kubernetes.cri.container-type":"container","io.kubernetes.cri.sandbox-name":%q,
"io.kubernetes.cri.sandbox-namespace":%q,"io.kubernetes.cri.sandbox-uid":%q}}`, p.name, p.namespace, p.uid))
			case "crio":
				write(t, filepath.Join(root, c, "userdata", "config.json"), fmt.Sprintf(`{"annotations":{
"io.kubernetes.pod.name":%q,"io.kubernetes.pod.namespace":%q,"io.kubernetes.pod.uid":%q}}`, p.name, p.namespace, p.uid))
			case "docker":
				write(t, filepath.Join(root, c, "config.v2.json"), fmt.Sprintf(`{"Config":{"Labels":{
"io.kubernetes.pod.name":%q,"io.kubernetes.pod.namespace":%q,"io.kubernetes.pod.uid":%q}}}`, p.name, p.namespace, p.uid))
			}
		}
	}
}

func touch(t *testing.T, path string) { write(t, path, "") }

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every kubelet layout: cgroup v1 and v2, cgroupfs and systemd drivers,
// each QoS class, each runtime's state.
func TestKubeletLayouts(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		for _, systemd := range []bool{false, true} {
			for _, runtime := range []string{"cri-containerd", "crio", "docker"} {
				name := fmt.Sprintf("v2=%v/systemd=%v/%s", v2, systemd, runtime)
				t.Run(name, func(t *testing.T) {
					dir := t.TempDir()
					h := layout(t, filepath.Join(dir, "cgroup"), v2, systemd, runtime)
					state := filepath.Join(dir, "state")
					runtimeState(t, state, runtime)
					n := Node{CgroupRoot: filepath.Join(dir, "cgroup"), StateRoots: []string{state}}
					checkNode(t, n, h)
				})
			}
		}
	}
}

func checkNode(t *testing.T, n Node, h string) {
	t.Helper()
	pods, err := n.Pods()
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != len(fixturePods) {
		t.Fatalf("%d pods, want %d: %+v", len(pods), len(fixturePods), pods)
	}
	for _, want := range fixturePods {
		ref := want.namespace + "/" + want.name
		p, err := n.FindPod(ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if p.UID != want.uid || p.QoS != want.qos || !strings.HasPrefix(p.Dir, h+"/") || !strings.Contains(p.Dir, "pod") {
			t.Errorf("%s: %+v, want uid %s, QoS %s, under %s", ref, p, want.uid, want.qos, h)
		}
		if byUID, err := n.FindPod(strings.ToUpper(want.uid)); err != nil || byUID.Dir != p.Dir {
			t.Errorf("by UID: %+v, %v", byUID, err)
		}
		for _, c := range want.containers {
			got, err := n.FindContainer(c[:12])
			if err != nil {
				t.Fatalf("container %s: %v", c[:12], err)
			}
			if got.ID != c || got.Pod.UID != want.uid || filepath.Dir(got.Dir) != p.Dir {
				t.Errorf("container %s: %+v", c[:12], got)
			}
		}
	}
	// A name in one namespace only needs no namespace; web is in two.
	if p, err := n.FindPod("db"); err != nil || p.UID != uidDB {
		t.Errorf("db: %+v, %v", p, err)
	}
	_, err = n.FindPod("web")
	if err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), "shop/web") ||
		!strings.Contains(err.Error(), "staging/web") {
		t.Errorf("web in two namespaces: %v", err)
	}
	_, err = n.FindPod("shop/nope")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "shop/db ("+uidDB+")") {
		t.Errorf("a missing pod: %v", err)
	}
	if _, err := n.FindContainer(cid(9)[:12]); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), cid(1)[:13]+" in pod shop/web") {
		t.Errorf("a missing container: %v", err)
	}
	if _, err := n.FindContainer("xyz"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("a malformed container ID: %v", err)
	}
}

// Without runtime state, pods are found by UID only, and the error says so.
func TestPodsWithoutRuntimeState(t *testing.T) {
	dir := t.TempDir()
	layout(t, filepath.Join(dir, "cgroup"), true, true, "cri-containerd")
	n := Node{CgroupRoot: filepath.Join(dir, "cgroup"), StateRoots: []string{filepath.Join(dir, "none")}}
	if p, err := n.FindPod(uidCache); err != nil || p.QoS != "besteffort" || p.Name != "" || p.String() != "pod "+uidCache {
		t.Errorf("by UID: %+v, %v", p, err)
	}
	_, err := n.FindPod("shop/web")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no container runtime state names them, give the UID") {
		t.Errorf("by name without state: %v", err)
	}
}

// Two containers sharing a prefix: the error lists both.
func TestAmbiguousContainerPrefix(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "cgroup")
	touch(t, filepath.Join(root, "cgroup.controllers"))
	pod := filepath.Join(root, "kubepods", "pod"+uidWeb)
	a, b := "abcd"+strings.Repeat("1", 60), "abcd"+strings.Repeat("2", 60)
	touch(t, filepath.Join(pod, a, "cgroup.procs"))
	touch(t, filepath.Join(pod, b, "cgroup.procs"))
	n := Node{CgroupRoot: root}
	_, err := n.FindContainer("abcd")
	if err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), a[:13]) || !strings.Contains(err.Error(), b[:13]) {
		t.Errorf("shared prefix: %v", err)
	}
	if c, err := n.FindContainer("abcd2"); err != nil || c.ID != b {
		t.Errorf("abcd2: %+v, %v", c, err)
	}
}

// A static pod (its UID a 32-hex-digit hash) under a systemd kubelet with
// --cgroup-root=/kubelet.slice, as kind lays it out: every slice name
// carries the root's prefix.
func TestStaticPodUnderACgroupRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "cgroup")
	touch(t, filepath.Join(root, "cgroup.controllers"))
	const static = "8d1c4b2a7e6f5d4c3b2a19087f6e5d4c"
	pod := filepath.Join(root, "kubelet.slice", "kubelet-kubepods.slice", "kubelet-kubepods-burstable.slice",
		"kubelet-kubepods-burstable-pod"+static+".slice")
	touch(t, filepath.Join(pod, "cri-containerd-"+cid(7)+".scope", "cgroup.procs"))
	state := filepath.Join(dir, "state")
	write(t, filepath.Join(state, cid(7), "config.json"), `{"annotations":{"io.kubernetes.cri.sandbox-name":"etcd-node1",
"io.kubernetes.cri.sandbox-namespace":"kube-system","io.kubernetes.cri.sandbox-uid":"`+static+`"}}`)
	n := Node{CgroupRoot: root, StateRoots: []string{state}}
	for _, ref := range []string{"kube-system/etcd-node1", static} {
		if p, err := n.FindPod(ref); err != nil || p.Dir != pod || p.QoS != "burstable" || p.UID != static {
			t.Errorf("%s: %+v, %v", ref, p, err)
		}
	}
	if c, err := n.FindContainer("containerd://" + cid(7)); err != nil || c.Pod.Name != "etcd-node1" {
		t.Errorf("containerd:// ID: %+v, %v", c, err)
	}
}

// An error names at most maxListed candidates, then how many more.
func TestListedIsCapped(t *testing.T) {
	var ids []int
	for i := 0; i < maxListed+2; i++ {
		ids = append(ids, i)
	}
	if got := listed(ids, func(i int) string { return fmt.Sprint(i) }); got != "0, 1, 2, 3, 4, 5, 6, 7, 2 more" {
		t.Errorf("listed: %q", got)
	}
}
