package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// A pod laid out on this machine's real cgroups exactly as the kubelet
// (cgroupfs driver, cgroup v1) lays out a burstable pod, with containerd's
// state naming it: attach --pod traces its processes, the one forked
// before attaching and the one that joins its container after.
func TestAttachPodTracesItsCgroup(t *testing.T) {
	const (
		uid = "5d2c1f0e-7b1a-4c3e-9f00-0e2a6b7c8d9e"
		cid = "3f6b1d2e4c5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	)
	pod := kubeletPod(t, "kubepods/burstable/pod"+uid)
	containerdState(t, cid, "numatrace-e2e", "hog", uid)
	wl := testutil.StartMemcgWorkload(t, filepath.Join(pod, cid), false) // the shell forks cat
	cg := wl.Cgroup

	nt := startAttach(t, "--pod", "numatrace-e2e/hog", "--json", "--duration", "60s")
	// Like `kubectl exec`: a new process joins the container's cgroup
	// after numatrace attached.
	late := exec.Command("sh", "-c", fmt.Sprintf("echo $$ > %s/cgroup.procs && exec cat %s %s > /dev/null",
		cg, testutil.BigFile(t), testutil.BigFile(t)))
	if err := late.Start(); err != nil {
		t.Fatal(err)
	}
	wl.Release(t)
	if err := late.Wait(); err != nil {
		t.Fatal(err)
	}
	nt.cmd.Process.Signal(os.Interrupt)
	nt.wait(t, 30*time.Second)

	lines := strings.Split(strings.TrimSpace(nt.stdout.String()), "\n")
	var sum struct {
		Type    string `json:"type"`
		Target  string `json:"target"`
		Threads []struct {
			PID    int `json:"pid"`
			Stalls map[string]struct {
				Count uint64 `json:"count"`
			} `json:"stalls"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Type != "summary" {
		t.Fatalf("no summary (%v): %.300s", err, lines[len(lines)-1])
	}
	want := "pod numatrace-e2e/hog (burstable), cgroup " + filepath.Join(testutil.MemcgV1, pod)
	if sum.Target != want {
		t.Errorf("target %q, want %q", sum.Target, want)
	}
	reclaims := map[int]uint64{}
	for _, th := range sum.Threads {
		reclaims[th.PID] += th.Stalls["memcg_reclaim"].Count
	}
	t.Logf("memcg reclaims by pid: %v (shell %d, late %d)", reclaims, wl.PID(), late.Process.Pid)
	if reclaims[late.Process.Pid] == 0 {
		t.Errorf("the process that joined the container after attach (pid %d) was not traced", late.Process.Pid)
	}
	forked := false
	for pid, n := range reclaims {
		if pid != late.Process.Pid && pid != wl.PID() && n > 0 {
			forked = true
		}
	}
	if !forked {
		t.Error("the cat the container's shell forked was not traced")
	}

	// The same container by ID prefix, and bad names: one line, exit 2.
	out, err := exec.Command(binary(t), "attach", "--no-tui", "--json", "--container", cid[:12], "--duration", "1s").Output()
	if err != nil || !strings.Contains(string(out), `"target":"container `+cid[:13]+` of pod numatrace-e2e/hog, cgroup `+cg+`"`) {
		t.Errorf("--container %s: %v: %.400s", cid[:12], err, out)
	}
	for args, wantErr := range map[string]string{
		"--pod numatrace-e2e/nope":     "no pod numatrace-e2e/nope on this node (pods here: ",
		"--container 0123456789ab":     "no container 0123456789ab on this node (containers here: ",
		"--pod hog --pid 1":            "give at most one of --pid, --tid, --cgroup, --pod and --container",
		"--container zz":               "want at least 4 hex digits",
		"--pod numatrace-e2e/hog/more": "no pod numatrace-e2e/hog/more",
	} {
		cmd := exec.Command(binary(t), append([]string{"attach", "--no-tui", "--duration", "1s"}, strings.Fields(args)...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Run()
		msg := stderr.String()
		if code := cmd.ProcessState.ExitCode(); code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, wantErr) {
			t.Errorf("attach %s: exit %d, stderr %q; want exit 2 and one line with %q", args, code, msg, wantErr)
		}
		if strings.HasPrefix(args, "--pod numatrace-e2e/nope") && !strings.Contains(msg, "numatrace-e2e/hog ("+uid+")") {
			t.Errorf("the error does not list the pod that is here: %s", msg)
		}
	}
}

// kubeletPod makes the pod's cgroup (and its parents) under the v1 memory
// controller, removed after the test; it returns the path below it.
func kubeletPod(t *testing.T, rel string) string {
	t.Helper()
	testutil.RequireRoot(t)
	_, err := os.Stat(filepath.Join(testutil.MemcgV1, "memory.limit_in_bytes"))
	testutil.RequireFeature(t, err == nil, "needs the cgroup v1 memory controller at "+testutil.MemcgV1)
	var made []string
	dir := testutil.MemcgV1
	for _, part := range strings.Split(rel, "/") {
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err == nil {
			made = append(made, dir)
		} else if !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			os.Remove(made[i])
		}
	})
	return rel
}

// containerdState writes a container's OCI config where containerd keeps
// it, with the annotations the CRI plugin gives a pod's containers.
func containerdState(t *testing.T, id, namespace, name, uid string) {
	t.Helper()
	root := "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
	var made []string
	for dir := root; dir != "/run"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			made = append(made, dir)
		}
	}
	dir := filepath.Join(root, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(dir)
		for _, d := range made { // deepest first
			os.Remove(d)
		}
	})
	cfg := fmt.Sprintf(`{"ociVersion":"1.1.0","annotations":{"io.kubernetes.cri.container-type":"container",
"io.kubernetes.cri.container-name":"hog","io.kubernetes.cri.sandbox-name":%q,"io.kubernetes.cri.sandbox-namespace":%q,
"io.kubernetes.cri.sandbox-uid":%q}}`, name, namespace, uid)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}
