package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/numatrace/numatrace/internal/testutil"
)

// The image runs as the DaemonSet runs it: podman gets exactly what the
// manifest grants (its capabilities, hostPID, its host mounts, its
// seccomp profile, a read-only root, no privilege escalation), read from
// the manifest itself, and nothing more. make test builds the image
// (make image) and names it in NUMATRACE_IMAGE.
func TestImageRunsAsTheDaemonSet(t *testing.T) {
	testutil.RequireRoot(t)
	image := os.Getenv("NUMATRACE_IMAGE")
	testutil.RequireFeature(t, image != "", "NUMATRACE_IMAGE unset: run through make test, which builds the image")
	_, err := exec.LookPath("podman")
	testutil.RequireFeature(t, err == nil, "podman not installed (make deps installs it)")
	ds := daemonSet(t)
	pm := newPodman(t)
	run := podmanArgs(t, ds)
	t.Logf("podman run %s", strings.Join(run, " "))

	t.Run("probes", func(t *testing.T) {
		out := pm.run(t, append(append([]string{"run", "--rm"}, run...), image, "probes", "--json")...)
		var rep struct {
			Probes []struct {
				Name     string `json:"name"`
				Attached bool   `json:"attached"`
				Error    string `json:"error"`
			} `json:"probes"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Probes) == 0 {
			t.Fatalf("probes --json: %v\n%s", err, out)
		}
		for _, p := range rep.Probes {
			if !p.Attached {
				t.Errorf("%s did not attach in the container: %s", p.Name, p.Error)
			}
		}
		t.Logf("%d probes attached in the container", len(rep.Probes))
	})

	// Under the runtime's default profile bpf() is refused for want of
	// CAP_SYS_ADMIN: numatrace says so in one line, naming the profile.
	t.Run("default-seccomp", func(t *testing.T) {
		var def []string
		for _, a := range run {
			if !strings.HasPrefix(a, "--security-opt=seccomp=") {
				def = append(def, a)
			}
		}
		cmd := pm.cmd(append(append([]string{"run", "--rm"}, def...), image, "probes")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		msg := stderr.String()
		if err == nil || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "a seccomp filter is on") ||
			!strings.Contains(msg, "seccomp/numatrace.json") {
			t.Errorf("probes under podman's default seccomp profile: %v, stderr %q; want one line naming the profile", err, msg)
		}
	})

	t.Run("doctor", func(t *testing.T) {
		// A host setting doctor names: THP always/always, for this test.
		thp := "/sys/kernel/mm/transparent_hugepage/"
		for _, f := range []string{"enabled", "defrag"} {
			old, err := os.ReadFile(thp + f)
			if err != nil {
				t.Fatal(err)
			}
			cur := regexp.MustCompile(`\[(\S+)\]`).FindSubmatch(old)
			if err := os.WriteFile(thp+f, []byte("always"), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.WriteFile(thp+f, cur[1], 0o644) })
		}
		// A host process, seen through hostPID.
		sleep := exec.Command("sleep", "60")
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { sleep.Process.Kill(); sleep.Wait() }()
		args := []string{"doctor", "--json", "--interval", "0", "--pid", fmt.Sprint(sleep.Process.Pid)}
		inside := pm.run(t, append(append([]string{"run", "--rm"}, run...), append([]string{image}, args...)...)...)
		host, err := exec.Command(hostBinary(t), args...).Output()
		if err != nil && len(host) == 0 {
			t.Fatalf("doctor on the host: %v", err)
		}
		// The same machine through the same /proc and /sys: the same
		// findings, but for whether doctor itself runs in a container.
		a, b := stableDoctor(t, inside), stableDoctor(t, string(host))
		if a != b {
			t.Errorf("doctor in the container differs from the host's:\ncontainer: %s\nhost:      %s", a, b)
		}
		if !strings.Contains(a, `"check":"thp_defrag"`) || !strings.Contains(a, "defrag = always") {
			t.Errorf("doctor in the container did not read the host's THP settings: %s", a)
		}
	})

	t.Run("serve", func(t *testing.T) {
		name := fmt.Sprintf("numatrace-e2e-serve-%d", os.Getpid())
		pm.run(t, append(append(append([]string{"run", "-d", "--name", name}, run...), image), serveArgs(t, ds)...)...)
		t.Cleanup(func() { pm.cmd("rm", "-f", "-t", "0", name).Run() })
		addr := pm.addr(t, name, ds)
		waitHealthy(t, "http://"+addr+"/healthz", pm, name)

		// A host process in a host memory cgroup, reclaiming.
		wl := testutil.StartMemcgWorkload(t, "numatrace-e2e-podman", true)
		wl.Release(t)
		want := regexp.MustCompile(`(?m)^numatrace_stall_seconds_count\{cause="memcg_reclaim",cgroup="/numatrace-e2e-podman",[^}]*\} (\d+)`)
		var body string
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			body = get(t, "http://"+addr+"/metrics")
			if m := want.FindStringSubmatch(body); m != nil && m[1] != "0" {
				t.Logf("scraped from the host: %s", m[0])
				break
			}
		}
		if m := want.FindStringSubmatch(body); m == nil || m[1] == "0" {
			t.Errorf("no memcg_reclaim stalls of /numatrace-e2e-podman in the container's metrics:\n%s\nlogs:\n%s",
				grepLines(body, "numatrace_stall_seconds_count"), pm.output("logs", name))
		}
		// SIGTERM, as the kubelet stops it: a clean exit.
		pm.run(t, "stop", "-t", "20", name)
		if code := strings.TrimSpace(pm.output("inspect", "-f", "{{.State.ExitCode}}", name)); code != "0" {
			t.Errorf("serve exited %s on SIGTERM; logs:\n%s", code, pm.output("logs", name))
		}
	})
}

// podmanArgs turns the DaemonSet's pod and container spec into podman run
// flags, refusing any field it does not know how to grant: what the test
// runs is what the manifest says.
func podmanArgs(t *testing.T, ds *appsv1.DaemonSet) []string {
	t.Helper()
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("the container has no securityContext with capabilities")
	}
	if pod.SecurityContext != nil && !reflect.DeepEqual(*pod.SecurityContext, corev1.PodSecurityContext{}) {
		t.Fatalf("a pod-level securityContext (%+v): not one this test can grant", pod.SecurityContext)
	}
	var args []string
	if pod.HostPID {
		args = append(args, "--pid=host")
	}
	if pod.HostNetwork {
		args = append(args, "--network=host")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Fatal("the manifest asks for a privileged container")
	}
	for _, d := range sc.Capabilities.Drop {
		args = append(args, "--cap-drop="+string(d))
	}
	for _, a := range sc.Capabilities.Add {
		args = append(args, "--cap-add=CAP_"+string(a))
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		args = append(args, "--security-opt=no-new-privileges")
	}
	if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		args = append(args, "--read-only")
	}
	if sc.RunAsUser != nil {
		args = append(args, fmt.Sprintf("--user=%d", *sc.RunAsUser))
	}
	switch p := sc.SeccompProfile; {
	case p == nil || p.Type == corev1.SeccompProfileTypeRuntimeDefault:
		// podman's own default, as a runtime's default would be.
	case p.Type == corev1.SeccompProfileTypeLocalhost && p.LocalhostProfile != nil:
		// The kubelet reads it from its seccomp directory; the repository
		// ships it beside the manifest.
		path, err := filepath.Abs(filepath.Join("kubernetes", "seccomp", *p.LocalhostProfile))
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--security-opt=seccomp="+path)
	default:
		t.Fatalf("seccomp profile %+v: not one this test can grant", p)
	}
	if m := c.Resources.Limits.Memory(); m != nil && !m.IsZero() {
		args = append(args, fmt.Sprintf("--memory=%d", m.Value()))
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath == nil {
			t.Fatalf("volume %s is not a hostPath", v.Name)
		}
		hostPaths[v.Name] = v.HostPath.Path
	}
	for _, m := range c.VolumeMounts {
		opt := "rw"
		if m.ReadOnly {
			opt = "ro"
		}
		args = append(args, fmt.Sprintf("--volume=%s:%s:%s", hostPaths[m.Name], m.MountPath, opt))
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			continue // the pod IP: set where the address is chosen
		}
		args = append(args, "--env="+e.Name+"="+e.Value)
	}
	return args
}

// serveArgs are the container's args with the kubelet's $(VAR)
// expansion. The pod IP becomes 0.0.0.0: in the container's own network
// namespace that is the pod's address and no other.
func serveArgs(t *testing.T, ds *appsv1.DaemonSet) []string {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers[0]
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			vars[e.Name] = "0.0.0.0"
		default:
			t.Fatalf("env %s: not a value this test can give", e.Name)
		}
	}
	var out []string
	for _, a := range c.Args {
		out = append(out, regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(a, func(m string) string {
			return vars[m[2:len(m)-1]]
		}))
	}
	return out
}

// podman runs podman with this machine's needs: runc (crun refuses the
// hybrid cgroup layout), cgroupfs (no systemd here), no ulimits it cannot
// raise, events in a file.
type podman struct {
	conf string
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "containers.conf")
	err := os.WriteFile(conf, []byte(`[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return &podman{conf: conf}
}

func (p *podman) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+p.conf)
	return cmd
}

// run runs podman and returns its stdout; a failure ends the test.
func (p *podman) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := p.cmd(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func (p *podman) output(args ...string) string {
	out, _ := p.cmd(args...).CombinedOutput()
	return string(out)
}

// addr is where serve listens: its container's IP on podman's network,
// at the manifest's port.
func (p *podman) addr(t *testing.T, name string, ds *appsv1.DaemonSet) string {
	t.Helper()
	port := ds.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort
	ip := strings.TrimSpace(p.output("inspect", "-f", "{{.NetworkSettings.IPAddress}}", name))
	if ds.Spec.Template.Spec.HostNetwork || ip == "" {
		ip = "127.0.0.1"
	}
	return fmt.Sprintf("%s:%d", ip, port)
}

func waitHealthy(t *testing.T, url string, p *podman, name string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("%s never answered; logs:\n%s", url, p.output("logs", name))
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// hostBinary builds numatrace for the host once per test.
func hostBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "numatrace")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/numatrace").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// stableDoctor is what doctor read of the machine: its findings' checks,
// severities, titles and evidence, and the process's memory per node.
// The container finding and the wording of fixes (on the node, or from
// inside a container) say where doctor itself runs, not what it read.
func stableDoctor(t *testing.T, out string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	var keep []any
	fs, _ := v["findings"].([]any)
	for _, f := range fs {
		m, ok := f.(map[string]any)
		// PSI's averages move between two readings seconds apart (after
		// the tests before this one, by 4 points of avg10 in a CI run),
		// and their severity with them: what is compared is the machine's
		// settings, which hold still.
		check, _ := m["check"].(string)
		if !ok || check == "container" || strings.HasPrefix(check, "psi_") {
			continue
		}
		keep = append(keep, map[string]any{"check": m["check"], "severity": m["severity"], "title": m["title"], "evidence": m["evidence"]})
	}
	v["findings"] = keep
	// The target's memory cgroup is read live: its bytes move with
	// everything else in the group (in CI, the whole test run's group)
	// between the two readings. Its name, version and events stay.
	if mc, ok := v["memory_cgroup"].(map[string]any); ok {
		for k := range mc {
			if strings.HasSuffix(k, "_bytes") {
				delete(mc, k)
			}
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}
