package vmtest

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// cpioFile is one entry of a newc cpio archive.
type cpioFile struct {
	name  string
	mode  uint32 // including the file type bits
	data  []byte
	major uint32 // device files
	minor uint32
}

const (
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFCHR = 0o020000
)

// writeCPIO writes files as a gzip-compressed newc archive, the format the
// kernel unpacks into its initramfs.
func writeCPIO(w io.Writer, files []cpioFile) error {
	zw := gzip.NewWriter(w)
	pad := func(n int) error {
		if r := n % 4; r != 0 {
			_, err := zw.Write(make([]byte, 4-r))
			return err
		}
		return nil
	}
	entry := func(ino int, f cpioFile) error {
		name := strings.TrimPrefix(f.name, "/")
		hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
			ino, f.mode, 0, 0, 1, 0, len(f.data), 0, 0, f.major, f.minor, len(name)+1, 0)
		if _, err := io.WriteString(zw, hdr+name+"\x00"); err != nil {
			return err
		}
		if err := pad(len(hdr) + len(name) + 1); err != nil {
			return err
		}
		if _, err := zw.Write(f.data); err != nil {
			return err
		}
		return pad(len(f.data))
	}
	for i, f := range files {
		if err := entry(i+1, f); err != nil {
			return err
		}
	}
	if err := entry(len(files)+1, cpioFile{name: "TRAILER!!!"}); err != nil {
		return err
	}
	return zw.Close()
}

// Initramfs builds the guest's initramfs: ntguest as /init, numatrace, and
// brd.ko if given, and each of the host's files in extra at its own path
// (links followed). The kernel needs /dev/console before init runs.
func Initramfs(path, ntguest, numatrace, brd string, extra ...string) error {
	files := []cpioFile{
		{name: "dev", mode: sIFDIR | 0o755},
		{name: "dev/console", mode: sIFCHR | 0o600, major: 5, minor: 1},
		{name: "proc", mode: sIFDIR | 0o755},
		{name: "sys", mode: sIFDIR | 0o755},
		{name: "tmp", mode: sIFDIR | 0o1777},
		{name: "bin", mode: sIFDIR | 0o755},
		{name: "lib", mode: sIFDIR | 0o755},
	}
	add := func(name, src string, mode uint32) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		files = append(files, cpioFile{name: name, mode: sIFREG | mode, data: b})
		return nil
	}
	if err := add("init", ntguest, 0o755); err != nil {
		return err
	}
	if err := add("bin/numatrace", numatrace, 0o755); err != nil {
		return err
	}
	if brd != "" {
		if err := add("lib/brd.ko", brd, 0o644); err != nil {
			return err
		}
	}
	// The directories extra needs, parents first (a sorted path comes
	// after its parent's).
	have := map[string]bool{"dev": true, "proc": true, "sys": true, "tmp": true, "bin": true, "lib": true}
	var dirs []string
	for _, src := range extra {
		for d := filepath.Dir(strings.TrimPrefix(src, "/")); d != "." && !have[d]; d = filepath.Dir(d) {
			have[d] = true
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		files = append(files, cpioFile{name: d, mode: sIFDIR | 0o755})
	}
	for _, src := range extra {
		if err := add(strings.TrimPrefix(src, "/"), src, 0o755); err != nil {
			return err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeCPIO(f, files); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
