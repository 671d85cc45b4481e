package psi

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// Mount tables as the kernel writes them.
const (
	hybridMounts = `22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw
`
	pureV2Mounts = `25 1 0:23 / /sys rw - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	v1OnlyMounts = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`
	hybridCgroup = "9:name=systemd:/\n4:memory:/process_api/232d\n1:cpu:/\n0::/user.slice/job\n"
)

func TestCgroupOf(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup, mounts string
		want                 Scope
		notAvail             string // a part of the NotAvailableError's reason
	}{
		{name: "hybrid: cgroup2 beside v1", cgroup: hybridCgroup, mounts: hybridMounts,
			want: Scope{Name: "/user.slice/job", File: "sys/fs/cgroup/unified/user.slice/job/memory.pressure"}},
		{name: "pure v2", cgroup: "0::/system.slice/redis.service\n", mounts: pureV2Mounts,
			want: Scope{Name: "/system.slice/redis.service", File: "sys/fs/cgroup/system.slice/redis.service/memory.pressure"}},
		{name: "root group", cgroup: "0::/\n", mounts: pureV2Mounts,
			want: Scope{Name: "/", File: "sys/fs/cgroup/memory.pressure"}},
		{name: "a subtree bind-mounted, no cgroup namespace", cgroup: "0::/kubepods/pod1/c1\n",
			mounts: "33 25 0:28 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			want:   Scope{Name: "/kubepods/pod1/c1", File: "sys/fs/cgroup/c1/memory.pressure"}},
		{name: "mount point with a space", cgroup: "0::/a\n",
			mounts: `33 25 0:28 / /mnt/cg\040two rw - cgroup2 none rw` + "\n",
			want:   Scope{Name: "/a", File: "mnt/cg two/a/memory.pressure"}},
		{name: "no v2 line", cgroup: "4:memory:/x\n1:cpu:/\n", mounts: v1OnlyMounts,
			notAvail: `no "0::" line: the process is in no cgroup v2 group`},
		{name: "cgroup2 not mounted", cgroup: "4:memory:/x\n0::/\n", mounts: v1OnlyMounts,
			notAvail: "no cgroup2 file system is mounted"},
		{name: "group not under the mount's root", cgroup: "0::/system.slice/x\n",
			mounts:   "33 25 0:28 /kubepods /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			notAvail: "no cgroup2 mount shows its group /system.slice/x"},
		{name: "outside our cgroup namespace", cgroup: "0::/../../other.slice\n", mounts: pureV2Mounts,
			notAvail: "its group /../../other.slice is outside numatrace's cgroup namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _ := fakeRoot(t, map[string]string{"proc/42/cgroup": tc.cgroup, "proc/self/mountinfo": tc.mounts})
			got, err := CgroupOf(root, 42)
			if tc.notAvail == "" {
				if err != nil || got != tc.want {
					t.Fatalf("CgroupOf = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			var na *NotAvailableError
			if !errors.As(err, &na) || na.Scope != "pid 42" || !strings.Contains(na.Reason, tc.notAvail) {
				t.Fatalf("CgroupOf = %+v, %v; want not available for pid 42: %s", got, err, tc.notAvail)
			}
		})
	}
}

func TestCgroupOfErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no such process", map[string]string{"proc/self/mountinfo": pureV2Mounts}, "/proc/42/cgroup: no such file"},
		{"bad mountinfo line", map[string]string{"proc/42/cgroup": "0::/\n", "proc/self/mountinfo": "33 25 0:28 / /sys/fs/cgroup rw cgroup2\n"},
			`/proc/self/mountinfo: line 1: want "id parent dev root point opts ... - fstype ...", got "33 25`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, _ := fakeRoot(t, tc.files)
			got, err := CgroupOf(root, 42)
			if err == nil || errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CgroupOf = %+v, %v; want an error (not PSI missing) with %q", got, err, tc.want)
			}
		})
	}
}

func TestCgroupDir(t *testing.T) {
	files := map[string]string{
		"proc/self/mountinfo":                hybridMounts,
		"sys/fs/cgroup/unified/a/b/":         "",
		"sys/fs/cgroup/unifiedX/":            "",
		"sys/fs/cgroup/memory/process_api/":  "",
		"sys/fs/cgroup/unified/a/b/file.txt": "",
	}
	for _, tc := range []struct {
		dir      string
		want     Scope
		notAvail string // a part of the NotAvailableError's reason
		err      string // a part of another error
	}{
		{dir: "/sys/fs/cgroup/unified/a/b", want: Scope{Name: "/a/b", File: "sys/fs/cgroup/unified/a/b/memory.pressure"}},
		{dir: "/sys/fs/cgroup/unified/a/b/", want: Scope{Name: "/a/b", File: "sys/fs/cgroup/unified/a/b/memory.pressure"}},
		{dir: "/sys/fs/cgroup/unified", want: Scope{Name: "/", File: "sys/fs/cgroup/unified/memory.pressure"}},
		{dir: "/sys/fs/cgroup/memory/process_api", notAvail: "a cgroup v1 directory: PSI per cgroup needs cgroup v2"},
		{dir: "/sys/fs/cgroup/unifiedX", err: "/sys/fs/cgroup/unifiedX is not a cgroup directory: it is on tmpfs"},
		{dir: "/sys/fs/cgroup/unified/a/b/file.txt", err: "/sys/fs/cgroup/unified/a/b/file.txt is not a directory"},
		{dir: "/sys/fs/cgroup/unified/nope", err: "/sys/fs/cgroup/unified/nope: no such file"},
		{dir: "unified/a/b", err: "cgroup directory unified/a/b is not an absolute path"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			root, _ := fakeRoot(t, files)
			got, err := CgroupDir(root, tc.dir)
			var na *NotAvailableError
			switch {
			case tc.notAvail != "":
				if !errors.As(err, &na) || !strings.Contains(na.Reason, tc.notAvail) {
					t.Fatalf("CgroupDir = %+v, %v; want not available: %s", got, err, tc.notAvail)
				}
			case tc.err != "":
				if err == nil || errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("CgroupDir = %+v, %v; want an error with %q", got, err, tc.err)
				}
			case err != nil || got != tc.want:
				t.Fatalf("CgroupDir = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// A cgroup2 mounted over a v1 hierarchy on the same point hides it.
func TestCgroupDirLaterMountWins(t *testing.T) {
	root, _ := fakeRoot(t, map[string]string{
		"proc/self/mountinfo": "34 30 0:31 / /cg rw - cgroup cgroup rw,memory\n50 30 0:40 / /cg rw - cgroup2 cgroup2 rw\n",
		"cg/x/":               "",
	})
	got, err := CgroupDir(root, "/cg/x")
	if err != nil || got != (Scope{Name: "/x", File: "cg/x/memory.pressure"}) {
		t.Fatalf("CgroupDir = %+v, %v; want the cgroup2 group /x", got, err)
	}
}

// Every cgroup mount of this machine: the root of a cgroup2 one is a
// group with a memory.pressure numatrace can read (or PSI is off); a v1
// one has no PSI per group.
func TestCgroupDirLive(t *testing.T) {
	root := liveRoot(t)
	ms, err := readMounts(root)
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	for _, m := range ms {
		if m.fstype != "cgroup" && m.fstype != "cgroup2" {
			continue
		}
		seen++
		sc, err := CgroupDir(root, m.point)
		if m.fstype == "cgroup" {
			if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "needs cgroup v2") {
				t.Errorf("v1 mount %s: %+v, %v; want not available, needs v2", m.point, sc, err)
			}
			continue
		}
		if err != nil || sc.Name != m.root || sc.File != strings.TrimPrefix(m.point, "/")+"/memory.pressure" {
			t.Errorf("cgroup2 mount %s: %+v, %v", m.point, sc, err)
			continue
		}
		if tot, err := Read(root, sc); err != nil && !errors.Is(err, ErrNotAvailable) || tot.Full > tot.Some {
			t.Errorf("%s: %+v, %v", sc.File, tot, err)
		}
	}
	testutil.RequireFeature(t, seen > 0, "no cgroup file system mounted")
}

// A process moved into a new cgroup2 group: CgroupOf finds that group,
// its memory.pressure reads, and once cgroup.pressure is 0 it is not
// available, with that reason.
func TestCgroupOfLive(t *testing.T) {
	testutil.RequireRoot(t)
	root := liveRoot(t)
	mine, err := CgroupOf(root, os.Getpid())
	testutil.RequireFeature(t, err == nil, "no cgroup2 group for this process: "+errString(err))
	parent := "/" + strings.TrimSuffix(mine.File, "/memory.pressure")
	name := "numatrace-psi-test-" + strconv.Itoa(os.Getpid())
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		testutil.RequireFeature(t, false, "cannot make a cgroup2 group: "+err.Error())
	}
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sleep.Process.Kill()
		sleep.Wait()
		// The group empties a moment after its last process is reaped.
		for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0o644); err != nil {
		testutil.RequireFeature(t, false, "cannot move a process into a cgroup2 group: "+err.Error())
	}

	sc, err := CgroupOf(root, sleep.Process.Pid)
	wantName := strings.TrimSuffix(mine.Name, "/") + "/" + name
	if err != nil || sc.Name != wantName || "/"+sc.File != dir+"/memory.pressure" {
		t.Fatalf("CgroupOf(sleep) = %+v, %v; want %s at %s", sc, err, wantName, dir)
	}
	if tot, err := Read(root, sc); err != nil || tot.Full > tot.Some {
		t.Fatalf("Read(%s) = %+v, %v", sc.File, tot, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.pressure"), []byte("0"), 0o644); err != nil {
		testutil.RequireFeature(t, false, "cgroup.pressure not writable (kernel before 6.1?): "+err.Error())
	}
	_, err = Read(root, sc)
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "its cgroup.pressure is 0") {
		t.Errorf("with cgroup.pressure 0: %v; want not available, saying so", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
