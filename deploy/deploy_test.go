// Package deploy holds the deployment files; its test checks them against
// the Kubernetes API types, systemd's own verifier and the metrics numatrace
// exports.
package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/exporter"
	"github.com/numatrace/numatrace/internal/stall"
	"github.com/numatrace/numatrace/internal/testutil"
)

// docs splits a multi-document YAML file.
func docs(t *testing.T, path string) [][]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(d) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

// daemonSet reads the manifest's DaemonSet, strictly.
func daemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	var ds *appsv1.DaemonSet
	for _, d := range docs(t, "kubernetes/daemonset.yaml") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(d, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			// Strict: a misspelt or misplaced field is an error, as the API
			// server's schema validation would make it.
			if err := yaml.UnmarshalStrict(d, ds); err != nil {
				t.Fatalf("DaemonSet does not match the apps/v1 schema: %v", err)
			}
		case "Namespace":
			if err := yaml.UnmarshalStrict(d, &corev1.Namespace{}); err != nil {
				t.Fatalf("Namespace: %v", err)
			}
		default:
			t.Fatalf("unexpected kind %q", meta.Kind)
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet")
	}
	return ds
}

func TestDaemonSet(t *testing.T) {
	ds := daemonSet(t)
	if ds.APIVersion != "apps/v1" || ds.Spec.Selector == nil ||
		ds.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != ds.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Error("the selector does not match the pod template")
	}
	pod := ds.Spec.Template.Spec
	if !pod.HostPID {
		t.Error("hostPID is needed to name the cgroups of every process")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Args[0] != "serve" || !slices.Contains(c.Args, "--listen=$(POD_IP):9464") {
		t.Errorf("args %v", c.Args)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Fatal("the container must be unprivileged, without privilege escalation")
	}
	var add []string
	for _, c := range sc.Capabilities.Add {
		add = append(add, string(c))
	}
	slices.Sort(add)
	if !slices.Equal(add, []string{"BPF", "PERFMON"}) || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("capabilities: add %v drop %v; want only BPF and PERFMON", add, sc.Capabilities.Drop)
	}
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("%s is mounted writable", m.MountPath)
		}
		mounts[m.MountPath] = true
	}
	for _, want := range []string{"/sys/kernel/btf", "/sys/fs/cgroup"} {
		if !mounts[want] {
			t.Errorf("%s is not mounted", want)
		}
	}
	if p := sc.SeccompProfile; p == nil || p.Type != corev1.SeccompProfileTypeLocalhost || p.LocalhostProfile == nil {
		t.Errorf("seccomp profile %+v: want the shipped Localhost profile", p)
	} else if _, err := os.Stat(filepath.Join("kubernetes", "seccomp", *p.LocalhostProfile)); err != nil {
		t.Errorf("the Localhost profile is not shipped: %v", err)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("no /healthz liveness probe")
	}
}

func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("systemd/numatrace.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			unit[k] = v
		}
	}
	if !strings.Contains(unit["ExecStart"], " serve --listen 127.0.0.1:9464") || unit["KillSignal"] != "SIGTERM" {
		t.Errorf("ExecStart %q, KillSignal %q", unit["ExecStart"], unit["KillSignal"])
	}
	if unit["AmbientCapabilities"] != "CAP_BPF CAP_PERFMON" || unit["CapabilityBoundingSet"] != unit["AmbientCapabilities"] {
		t.Errorf("capabilities: %q bounded by %q", unit["AmbientCapabilities"], unit["CapabilityBoundingSet"])
	}
	// systemd's own verifier, on a copy that runs a binary that exists.
	bin, err := exec.LookPath("systemd-analyze")
	testutil.RequireFeature(t, err == nil, "systemd-analyze not installed")
	exe, _ := os.Executable()
	copyPath := filepath.Join(t.TempDir(), "numatrace.service")
	os.WriteFile(copyPath, bytes.ReplaceAll(b, []byte("/usr/local/bin/numatrace"), []byte(exe)), 0o644)
	out, err := exec.Command(bin, "verify", copyPath).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/numatrace-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title         string `json:"title"`
		UID           string `json:"uid"`
		SchemaVersion int    `json:"schemaVersion"`
		Panels        []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" || dash.SchemaVersion < 30 || len(dash.Panels) < 6 {
		t.Fatalf("dashboard %q uid %q schema %d, %d panels", dash.Title, dash.UID, dash.SchemaVersion, len(dash.Panels))
	}
	// Every metric a panel queries is one numatrace exports.
	e := exporter.New(exporter.Config{ProcRoot: t.TempDir()})
	e.SetProbe("memcg_reclaim", true)
	e.SetFindings([]doctor.Finding{{Check: "thp_defrag"}})
	e.Stall(&stall.Event{Cause: stall.MemcgReclaim, DurNs: 1000, PID: 1})
	e.Stall(&stall.Event{Cause: stall.NUMATaskMove, PID: 1})
	mfs, err := e.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, mf := range mfs {
		known[mf.GetName()] = true
	}
	metric := regexp.MustCompile(`numatrace_[a-z_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
				if !known[base] && !known[m] {
					t.Errorf("panel %q queries %s, which numatrace does not export", p.Title, m)
				}
			}
		}
	}
}

// The shipped seccomp profile is the runtime's default (containers-
// common's, which podman and CRI-O use; make deps installs it) resolved for
// the DaemonSet's capabilities on amd64 and arm64, with bpf() and
// perf_event_open() allowed, and nothing else changed. Resolved, it has no
// capability or architecture conditions, which only the containers-common
// parser reads: containerd reads a Localhost profile as a plain OCI one and
// would apply every conditional rule. NUMATRACE_WRITE_SECCOMP=1 rewrites it.
func TestSeccompProfileIsDefaultPlusBPF(t *testing.T) {
	def := "/usr/share/containers/seccomp.json"
	_, err := os.Stat(def)
	testutil.RequireFeature(t, err == nil, def+" missing (make deps installs containers-common)")
	b, err := os.ReadFile(def)
	if err != nil {
		t.Fatal(err)
	}
	var caps []string
	for _, c := range daemonSet(t).Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add {
		caps = append(caps, "CAP_"+string(c))
	}
	want, err := seccompFor(b, caps, []string{"amd64", "arm64"}, []string{"bpf", "perf_event_open"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("kubernetes", "seccomp", "numatrace.json")
	if os.Getenv("NUMATRACE_WRITE_SECCOMP") != "" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the runtime default resolved for %v plus bpf and perf_event_open (NUMATRACE_WRITE_SECCOMP=1 rewrites it)", path, caps)
	}
	// containerd reads a Localhost profile into the OCI runtime spec's
	// type and nothing else: every field must be one of its.
	var p specs.LinuxSeccomp
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("not an OCI seccomp profile: %v", err)
	}
	allowed := map[string]bool{}
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			if r.Action == specs.ActAllow {
				allowed[n] = true
			} else if n == "bpf" || n == "perf_event_open" {
				t.Errorf("a %s rule names %s", r.Action, n)
			}
		}
	}
	for _, n := range []string{"bpf", "perf_event_open", "clone", "mmap", "epoll_pwait"} {
		if !allowed[n] {
			t.Errorf("%s is not allowed", n)
		}
	}
	for _, n := range []string{"init_module", "kexec_load", "open_by_handle_at", "iopl", "settimeofday"} {
		if allowed[n] {
			t.Errorf("%s is allowed: more than the default gives these capabilities", n)
		}
	}
}

// seccompFor resolves a containers-common profile for a container holding
// caps on any of arches, as the runtime would, into a plain OCI profile,
// and allows extra unconditionally.
func seccompFor(profile []byte, caps, arches, extra []string) ([]byte, error) {
	type cond struct {
		Caps      []string `json:"caps"`
		Arches    []string `json:"arches"`
		MinKernel string   `json:"minKernel"`
	}
	type rule struct {
		Names    []string          `json:"names"`
		Action   string            `json:"action"`
		Args     []json.RawMessage `json:"args"`
		Includes cond              `json:"includes"`
		Excludes cond              `json:"excludes"`
		ErrnoRet *uint             `json:"errnoRet,omitempty"`
	}
	var in struct {
		DefaultAction   string `json:"defaultAction"`
		DefaultErrnoRet *uint  `json:"defaultErrnoRet"`
		Syscalls        []rule `json:"syscalls"`
	}
	if err := json.Unmarshal(profile, &in); err != nil {
		return nil, err
	}
	type ociRule struct {
		Names    []string          `json:"names"`
		Action   string            `json:"action"`
		Args     []json.RawMessage `json:"args,omitempty"`
		ErrnoRet *uint             `json:"errnoRet,omitempty"`
	}
	out := struct {
		DefaultAction   string    `json:"defaultAction"`
		DefaultErrnoRet *uint     `json:"defaultErrnoRet,omitempty"`
		Syscalls        []ociRule `json:"syscalls"`
	}{DefaultAction: in.DefaultAction, DefaultErrnoRet: in.DefaultErrnoRet}
	// First: load and attach BPF with CAP_BPF and CAP_PERFMON (the
	// default asks CAP_SYS_ADMIN for them).
	out.Syscalls = append(out.Syscalls, ociRule{Names: extra, Action: "SCMP_ACT_ALLOW"})
	held := func(c []string) bool { // every one of c
		for _, x := range c {
			if !slices.Contains(caps, x) {
				return false
			}
		}
		return true
	}
	for _, r := range in.Syscalls {
		if r.Includes.MinKernel != "" || r.Excludes.MinKernel != "" {
			return nil, fmt.Errorf("rule %v: minKernel conditions are not resolved here", r.Names)
		}
		switch {
		case !held(r.Includes.Caps):
			continue
		case len(r.Excludes.Caps) > 0 && slices.ContainsFunc(r.Excludes.Caps, func(c string) bool { return slices.Contains(caps, c) }):
			continue
		case len(r.Includes.Arches) > 0 && !slices.ContainsFunc(r.Includes.Arches, func(a string) bool { return slices.Contains(arches, a) }):
			continue
		case len(r.Excludes.Arches) > 0:
			return nil, fmt.Errorf("rule %v: architecture exclusions are not resolved here", r.Names)
		}
		names := r.Names
		if r.Action != "SCMP_ACT_ALLOW" { // an errno rule would win over the allow
			names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(extra, n) })
			if len(names) == 0 {
				continue
			}
		}
		out.Syscalls = append(out.Syscalls, ociRule{Names: names, Action: r.Action, Args: r.Args, ErrnoRet: r.ErrnoRet})
	}
	b, err := json.MarshalIndent(out, "", " ")
	return append(b, '\n'), err
}
