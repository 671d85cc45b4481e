// Package vmtest boots numatrace in a two-node QEMU guest, so NUMA stalls
// are real, on a matrix of Debian kernels. The kernels come from Debian's
// archive through a private apt configuration and are cached under
// vmtest/cache (git-ignored).
package vmtest

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Kernel is one kernel of the matrix.
type Kernel struct {
	Name    string // short name: 5.10, 6.1, 6.12
	Package string // Debian package with the kernel image
	Suite   string // Debian suite that serves it
	// Full runs every scenario; the others check the probes and run the
	// misplaced-memory smoke test.
	Full bool
}

// Accel is the QEMU accelerator every guest runs on: software emulation
// of both vCPUs on one host thread. Multi-threaded TCG (a host thread per
// vCPU) leaves a vCPU spinning at a kernel text site that another vCPU
// re-patched (text_poke_bp, as every tracepoint attach and detach does),
// with interrupts off and a valid instruction in memory; the patcher then
// waits for it for ever. It locked up or hung 4 of 10 6.1 guests looping
// numatrace probes, and bpftrace on the same hooks the same way once
// another thread ran; on one host thread, 0 of 20 guests (600 cycles,
// idle and busy) did (vmtest/LOCKUP.md).
const Accel = "tcg,thread=single"

// Matrix is every guest kernel numatrace is tested on. The host kernel
// runs the rest of the test suite.
var Matrix = []Kernel{
	{Name: "6.1", Package: "linux-image-6.1.0-50-amd64-unsigned", Suite: "bookworm", Full: true},
	{Name: "5.10", Package: "linux-image-5.10.0-30-amd64-unsigned", Suite: "bullseye"},
	{Name: "6.12", Package: "linux-image-6.12.95+deb12-amd64-unsigned", Suite: "bookworm-backports"},
}

// debianMirror is the archive the machine's own apt sources use.
func debianMirror() string {
	b, err := os.ReadFile("/etc/apt/sources.list.d/debian.sources")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "URIs:"); ok {
				for _, uri := range strings.Fields(v) {
					if !strings.Contains(uri, "security") {
						return uri
					}
				}
			}
		}
	}
	return "http://deb.debian.org/debian"
}

// Cache holds fetched packages and what is extracted from them.
type Cache struct{ Dir string }

func (c Cache) aptOptions() []string {
	d := filepath.Join(c.Dir, "apt")
	return []string{
		"-o", "Dir::Etc::sourcelist=" + filepath.Join(d, "sources.list"),
		"-o", "Dir::Etc::sourceparts=-",
		"-o", "Dir::State::Lists=" + filepath.Join(d, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(d, "cache"),
	}
}

// writeSources writes the private apt source list for every suite needed.
func (c Cache) writeSources() error {
	d := filepath.Join(c.Dir, "apt")
	for _, sub := range []string{"lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return err
		}
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, k := range Matrix {
		if !seen[k.Suite] {
			seen[k.Suite] = true
			fmt.Fprintf(&b, "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n", debianMirror(), k.Suite)
		}
	}
	return os.WriteFile(filepath.Join(d, "sources.list"), []byte(b.String()), 0o644)
}

// deb returns the cached package file of k, downloading it if missing.
func (c Cache) deb(k Kernel) (string, error) {
	dir := filepath.Join(c.Dir, "debs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	find := func() string {
		m, _ := filepath.Glob(filepath.Join(dir, k.Package+"_*.deb"))
		if len(m) > 0 {
			return m[0]
		}
		return ""
	}
	if p := find(); p != "" {
		return p, nil
	}
	if err := c.writeSources(); err != nil {
		return "", err
	}
	if out, err := exec.Command("apt-get", append(c.aptOptions(), "update", "-qq")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get update: %v: %s", err, out)
	}
	dl := exec.Command("apt-get", append(c.aptOptions(), "download", k.Package)...)
	dl.Dir = dir
	if out, err := dl.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download %s: %v: %s", k.Package, err, out)
	}
	if p := find(); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("%s: downloaded but not found in %s", k.Package, dir)
}

// Extracted is a kernel image and the modules the guest loads.
type Extracted struct {
	Vmlinuz string
	Brd     string // brd.ko, or "" if the kernel ships it compressed or not at all
}

// Extract unpacks k's kernel image and brd.ko (once) and returns their
// paths. Only those two files leave the package.
func (c Cache) Extract(k Kernel) (*Extracted, error) {
	deb, err := c.deb(k)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(c.Dir, "root-"+k.Name)
	if _, err := os.Stat(filepath.Join(root, ".extracted")); err != nil {
		os.RemoveAll(root)
		if err := extractFiles(deb, root); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(root, ".extracted"), nil, 0o644); err != nil {
			return nil, err
		}
	}
	e := &Extracted{}
	if p := filepath.Join(root, "vmlinuz"); fileExists(p) {
		e.Vmlinuz = p
	} else {
		return nil, fmt.Errorf("%s has no boot/vmlinuz", deb)
	}
	if p := filepath.Join(root, "brd.ko"); fileExists(p) {
		e.Brd = p
	}
	return e, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// extractFiles copies boot/vmlinuz-* and an uncompressed brd.ko out of a
// Debian package's data archive into dir.
func extractFiles(deb, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return fmt.Errorf("read %s: %w", deb, err)
		}
		var dst string
		switch base := filepath.Base(h.Name); {
		case strings.HasPrefix(h.Name, "./boot/vmlinuz-"):
			dst = "vmlinuz"
		case base == "brd.ko" && strings.Contains(h.Name, "/drivers/block/"):
			dst = "brd.ko"
		default:
			continue
		}
		f, err := os.Create(filepath.Join(dir, dst))
		if err != nil {
			return err
		}
		_, cerr := io.Copy(f, tr)
		if err := errors.Join(cerr, f.Close()); err != nil {
			return err
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %v: %s", deb, err, stderr.String())
	}
	return nil
}
