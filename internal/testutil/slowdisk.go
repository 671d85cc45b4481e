//go:build linux

package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// BlkioV1 is where this machine mounts the cgroup v1 blkio controller.
const BlkioV1 = "/sys/fs/cgroup/blkio"

// SlowDisk mounts a fresh ext4 file system of sizeBytes whose writes
// reach their disk at writeBps bytes a second at most, and returns its
// mount point; cleanup unmounts and removes it.
//
// A test that needs reclaim to wait for writeback needs a disk of known
// speed: how long a memcg's reclaim waits on pages under writeback is
// set by how fast they are written, and the hosts these tests run on
// differ tenfold (one wrote 1.3 GB/s, where redis's incident stalled 1
// window in 30; the host it was made on stalled 20). The file system
// sits on a loop device over a sparse file in /var/tmp (a real disk),
// with direct I/O so the backing file's pages are not cached twice, and
// the root blkio cgroup throttles writes to that loop device alone: the
// flusher's writeback, which runs in the root cgroup, is held to
// writeBps while the rest of the machine's I/O is not touched.
func SlowDisk(t testing.TB, sizeBytes, writeBps int64) string {
	t.Helper()
	RequireRoot(t)
	throttle := filepath.Join(BlkioV1, "blkio.throttle.write_bps_device")
	_, err := os.Stat(throttle)
	RequireFeature(t, err == nil, "needs the cgroup v1 blkio controller at "+BlkioV1)
	losetup := RequireTool(t, "losetup", "mount")
	mkfs := RequireTool(t, "mkfs.ext4", "e2fsprogs")

	work, err := os.MkdirTemp("/var/tmp", "numatrace-slowdisk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	backing := filepath.Join(work, "disk.img")
	f, err := os.Create(backing)
	if err == nil {
		err = f.Truncate(sizeBytes)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("slow disk: backing file: %v", err)
	}
	out, err := exec.Command(losetup, "--find", "--show", "--direct-io=on", backing).Output()
	if err != nil {
		t.Fatalf("slow disk: losetup: %v", err)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command(losetup, "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("slow disk: losetup --detach %s: %v: %s", dev, err, out)
		}
	})
	if out, err := exec.Command(mkfs, "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev).CombinedOutput(); err != nil {
		t.Fatalf("slow disk: mkfs.ext4 %s: %v: %s", dev, err, out)
	}
	mnt := filepath.Join(work, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dev, mnt, "ext4", 0, ""); err != nil {
		t.Fatalf("slow disk: mount %s: %v", dev, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("slow disk: unmount %s: %v", mnt, err)
		}
	})
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		t.Fatal(err)
	}
	majmin := fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	// A loop device's writeback settings outlive its detach: whatever an
	// earlier user of this one set, its dirty pages get the machine's
	// limits, as a disk's do by default.
	bdi := filepath.Join("/sys/class/bdi", majmin)
	for _, kv := range [][2]string{{"strict_limit", "0"}, {"max_ratio", "100"}} {
		if err := os.WriteFile(filepath.Join(bdi, kv[0]), []byte(kv[1]), 0o644); err != nil {
			t.Fatalf("slow disk: %s of %s: %v", kv[0], dev, err)
		}
	}
	if err := os.WriteFile(throttle, []byte(fmt.Sprintf("%s %d", majmin, writeBps)), 0o644); err != nil {
		t.Fatalf("slow disk: throttle %s: %v", dev, err)
	}
	// Registered last, so it runs first: the unmount's final writeback
	// is not held to the throttle.
	t.Cleanup(func() {
		if err := os.WriteFile(throttle, []byte(majmin+" 0"), 0o644); err != nil {
			t.Errorf("slow disk: lift the throttle on %s: %v", dev, err)
		}
	})
	return mnt
}

// SlowReads holds reads from the disk under dir (a SlowDisk's mount) to
// readBps bytes a second, in the root blkio cgroup, until the test ends:
// a page read back from it then waits for the disk long enough that the
// wait, not the CPU time around it, is most of the stall.
func SlowReads(t testing.TB, dir string, readBps int64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	majmin := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	throttle := filepath.Join(BlkioV1, "blkio.throttle.read_bps_device")
	if err := os.WriteFile(throttle, []byte(fmt.Sprintf("%s %d", majmin, readBps)), 0o644); err != nil {
		t.Fatalf("slow reads: throttle %s: %v", majmin, err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(throttle, []byte(majmin+" 0"), 0o644); err != nil {
			t.Errorf("slow reads: lift the throttle on %s: %v", majmin, err)
		}
	})
}
