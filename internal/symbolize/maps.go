package symbolize

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"
)

// maxMapsBytes bounds what is read of one maps file: a process with
// a million mappings is not worth stalling the recorder for.
const maxMapsBytes = 64 << 20

// mapping is one executable, file-backed line of /proc/pid/maps.
type mapping struct {
	start, end uint64
	offset     uint64 // file offset of start
	devMajor   uint32 // "08:01": 8
	devMinor   uint32 // "08:01": 1
	inode      uint64
	path       string // as the process sees it, without " (deleted)"
	deleted    bool
	// unreadable: its file could not be opened as the one mapped (why
	// says so), and is not tried again for this process.
	unreadable error
}

// key names m's file across processes and mount namespaces: the kernel's
// device and inode, ok false for a mapping with no file (inode 0).
func (m *mapping) key() (fileKey, bool) {
	return fileKey{m.devMajor, m.devMinor, m.inode}, m.inode != 0
}

// fileOffset is the offset in the mapped file of addr, which the
// mapping must contain.
func (m *mapping) fileOffset(addr uint64) uint64 {
	return addr - m.start + m.offset
}

// parseMaps keeps the executable mappings that name a file (or a
// pseudo-file such as [vdso]), sorted by start.
func parseMaps(r io.Reader) []*mapping {
	var maps []*mapping
	sc := bufio.NewScanner(io.LimitReader(r, maxMapsBytes))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if m, ok := parseMapsLine(sc.Text()); ok {
			maps = append(maps, m)
		}
	}
	sort.Slice(maps, func(i, j int) bool { return maps[i].start < maps[j].start })
	return maps
}

// parseMapsLine reads
// "7f0c1a400000-7f0c1a5a5000 r-xp 00028000 08:01 1835 /usr/lib/libc.so.6".
func parseMapsLine(line string) (*mapping, bool) {
	// The path may hold spaces: split off the five fields before it.
	fields := strings.SplitN(line, " ", 6)
	if len(fields) < 6 || len(fields[1]) < 3 || fields[1][2] != 'x' {
		return nil, false
	}
	path := strings.TrimLeft(fields[5], " ")
	if path == "" {
		return nil, false
	}
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return nil, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	offset, err3 := strconv.ParseUint(fields[2], 16, 64)
	inode, err4 := strconv.ParseUint(fields[4], 10, 64)
	major, minor, ok := strings.Cut(fields[3], ":")
	devMajor, err5 := strconv.ParseUint(major, 16, 32)
	devMinor, err6 := strconv.ParseUint(minor, 16, 32)
	if !ok || err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || err6 != nil || end <= start {
		return nil, false
	}
	m := &mapping{start: start, end: end, offset: offset, devMajor: uint32(devMajor), devMinor: uint32(devMinor), inode: inode, path: path}
	if p, ok := strings.CutSuffix(path, " (deleted)"); ok {
		m.path, m.deleted = p, true
	}
	return m, true
}

// findMapping returns the mapping that contains addr, or nil.
func findMapping(maps []*mapping, addr uint64) *mapping {
	i := sort.Search(len(maps), func(i int) bool { return maps[i].start > addr }) - 1
	if i < 0 || addr >= maps[i].end {
		return nil
	}
	return maps[i]
}
