package doctor

import "testing"

// The kubelet's and the runtimes' cgroup layouts, on cgroup v1 and v2,
// with the systemd and cgroupfs drivers, and the QoS classes.
func TestCgroupMarks(t *testing.T) {
	for line, want := range map[string]string{
		"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f1c2a4e_9b7d.slice/cri-containerd-8d2f.scope": "kubepods",
		"0::/kubepods.slice/kubepods-pod3f1c2a4e_9b7d.slice/crio-8d2f.scope":                                              "kubepods",
		"11:memory:/kubepods/besteffort/pod3f1c2a4e-9b7d/8d2f0c1b":                                                        "kubepods",
		"4:cpuset:/kubepods/pod3f1c2a4e-9b7d/8d2f0c1b":                                                                    "kubepods",
		"0::/system.slice/docker-4f2a9c.scope":                                                                            "docker",
		"12:memory:/docker/4f2a9c":                                                                                        "docker",
		"0::/machine.slice/libpod-4f2a9c.scope/container":                                                                 "libpod",
		"0::/lxc.payload.web":                                                                                             "lxc",
		"0::/init.scope":                                                                                                  "",
		"1:name=systemd:/user.slice/user-1000.slice/session-2.scope":                                                      "",
		"0::/system.slice/containerd.service":                                                                             "containerd", // matched anywhere; doctor judges only PID 1's cgroup, and a host's init is never there
	} {
		if got := cgroupMark(line); got != want {
			t.Errorf("cgroupMark(%q) = %q, want %q", line, got, want)
		}
	}
}
