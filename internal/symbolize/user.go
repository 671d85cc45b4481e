package symbolize

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/numatrace/numatrace/internal/stall"
)

const (
	maxProcs = 1024 // processes whose mappings are kept
	maxFiles = 256  // ELF files whose tables are kept
)

// NoteExited is the note of a stack whose process was gone.
const NoteExited = "process exited before its stack was read"

// User symbolizes user stacks of live processes.
type User struct {
	procRoot string

	mu    sync.Mutex
	procs *lru[uint32, *process]
	files *lru[fileKey, *elfFile]
}

// process is what is kept of one pid.
type process struct {
	maps []*mapping
	exe  string // path of its executable, as in its maps
}

// fileKey names a file across processes and mount namespaces.
type fileKey struct {
	dev   string
	inode uint64
	path  string // only when there is no inode
}

// NewUser reads processes under procRoot, normally "/proc".
func NewUser(procRoot string) *User {
	return &User{
		procRoot: procRoot,
		procs:    newLRU[uint32, *process](maxProcs),
		files:    newLRU[fileKey, *elfFile](maxFiles),
	}
}

// Forget drops what is cached of an exited process.
func (u *User) Forget(pid uint32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.procs.remove(pid)
}

// Regs are what was read of the stalled thread's user registers with its
// stack: rbp, which the kernel's frame-pointer walk started from, and the
// words at the stack pointer. Zero when not read (kernels before 5.15).
type Regs struct {
	BP    uint64
	Stack []uint64
}

// Frames symbolizes a user stack as the kernel's frame-pointer walk
// took it (addrs[0] is the instruction pointer), keeping only the frames
// that walk can be trusted for (see walk). note says why the stack is
// shorter than taken, "" if it is not.
func (u *User) Frames(pid uint32, addrs []uint64, regs Regs) (frames []stall.Frame, note string) {
	for len(addrs) > 0 && addrs[len(addrs)-1] == 0 {
		addrs = addrs[:len(addrs)-1]
	}
	if len(addrs) == 0 {
		return nil, ""
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	p, err := u.process(pid)
	if err != nil {
		// Without mappings nothing past the instruction pointer can be
		// told true.
		if os.IsNotExist(err) {
			return []stall.Frame{{Addr: addrs[0]}}, NoteExited
		}
		return []stall.Frame{{Addr: addrs[0]}}, fmt.Sprintf("cannot read the mappings of pid %d: %v", pid, err)
	}
	w := &walk{u: u, pid: pid, proc: p}
	return w.stack(addrs, regs)
}

// process returns the cached mappings of pid, reading them if needed.
func (u *User) process(pid uint32) (*process, error) {
	if p, ok := u.procs.get(pid); ok {
		return p, nil
	}
	p, err := u.readProcess(pid)
	if err != nil {
		return nil, err
	}
	u.procs.put(pid, p)
	return p, nil
}

func (u *User) readProcess(pid uint32) (*process, error) {
	dir := u.pidDir(pid)
	f, err := os.Open(filepath.Join(dir, "maps"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	maps := parseMaps(f)
	if len(maps) == 0 {
		// A zombie's maps read empty: its memory is gone.
		return nil, os.ErrNotExist
	}
	exe, _ := os.Readlink(filepath.Join(dir, "exe"))
	exe = strings.TrimSuffix(exe, " (deleted)")
	return &process{maps: maps, exe: exe}, nil
}

func (u *User) pidDir(pid uint32) string {
	return filepath.Join(u.procRoot, strconv.FormatUint(uint64(pid), 10))
}

// openPath is where the process's file of m can be read from here:
// through its root (containers), through map_files if it was deleted,
// else its own path.
func (u *User) openPath(pid uint32, m *mapping) string {
	dir := u.pidDir(pid)
	var candidate string
	if m.deleted {
		candidate = filepath.Join(dir, "map_files", fmt.Sprintf("%x-%x", m.start, m.end))
	} else {
		candidate = filepath.Join(dir, "root", m.path)
	}
	if _, err := os.Stat(candidate); err == nil {
		return candidate
	}
	return m.path
}

// file resolves the ELF file behind m, nil if it cannot be read.
func (u *User) file(pid uint32, m *mapping) *elfFile {
	if m.resolved {
		return m.file
	}
	m.resolved = true
	if strings.HasPrefix(m.path, "[") { // [vdso], [vsyscall]: no file
		return nil
	}
	m.openPath = u.openPath(pid, m)
	st, err := os.Stat(m.openPath)
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	key := fileKey{dev: m.dev, inode: m.inode}
	if m.inode == 0 {
		key.path = m.path
	}
	if ef, ok := u.files.get(key); ok && ef.size == st.Size() && ef.mtime.Equal(st.ModTime()) {
		m.file = ef
		return ef
	}
	ef, err := loadELF(m.openPath)
	if err != nil {
		// Remember the failure too, so as not to read the file again.
		ef = &elfFile{size: st.Size(), mtime: st.ModTime(), code: newCodeCache()}
	}
	u.files.put(key, ef)
	m.file = ef
	return ef
}
