package symbolize

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/numatrace/numatrace/internal/stall"
)

const (
	maxProcs = 1024 // processes whose mappings are kept
	// rereadEvery bounds how often one process's maps are read again
	// for an address none of them holds (code made at run time, which
	// no file names): a process with 60,000 mappings read them for
	// every such stack, seconds of CPU a second.
	rereadEvery = time.Second
	// loadWait is how long a stack waits for its files' tables, read
	// off the stream's goroutine: well inside the grace a window gives
	// its events (engine.Grace). Past it the stack keeps the frames'
	// files and offsets, and the next stack there has the names.
	loadWait = 100 * time.Millisecond
)

// NoteExited is the note of a stack whose process was gone.
const NoteExited = "process exited before its stack was read"

// User symbolizes user stacks of live processes.
type User struct {
	procRoot string

	mu      sync.Mutex
	procs   *lru[uint32, *process]
	files   *fileCache
	loading map[fileKey]*loading
	parsing chan struct{} // held while a file is parsed: one at a time
	wait    time.Duration // loadWait; tests change it
	now     func() time.Time
}

// process is what is kept of one pid.
type process struct {
	maps []*mapping
	exe  string // path of its executable, as in its maps
	// exec is the exec the maps are of (the kernel's self_exec_id, 0
	// if not known): a stack of a later one reads them again.
	exec uint64
	// rereadAt is when the maps were last read again for an address
	// none held; zero if they never were.
	rereadAt time.Time
}

// NewUser reads processes under procRoot, normally "/proc", keeping its
// files' tables within DefaultBudget bytes.
func NewUser(procRoot string) *User {
	return NewUserBudget(procRoot, DefaultBudget)
}

// NewUserBudget is NewUser with a budget of its own.
func NewUserBudget(procRoot string, budget int64) *User {
	return &User{
		procRoot: procRoot,
		procs:    newLRU[uint32, *process](maxProcs),
		files:    newFileCache(budget),
		loading:  map[fileKey]*loading{},
		parsing:  make(chan struct{}, 1),
		wait:     loadWait,
		now:      time.Now,
	}
}

// Close lets go of every file held open. Files still being read are let
// go when their reading ends.
func (u *User) Close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.files.closeAll()
	for k, l := range u.loading {
		go func() {
			<-l.done
			if l.ef != nil {
				l.ef.close()
			}
		}()
		delete(u.loading, k)
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
// took it (addrs[0] is the instruction pointer) in pid's exec exec (0:
// not known), keeping only the frames that walk can be trusted for (see
// walk). note says why the stack is shorter than taken, "" if it is not;
// pending says that a file's tables were still being read, so the same
// addresses may be named better later: the result is not worth keeping.
func (u *User) Frames(pid uint32, exec uint64, addrs []uint64, regs Regs) (frames []stall.Frame, note string, pending bool) {
	for len(addrs) > 0 && addrs[len(addrs)-1] == 0 {
		addrs = addrs[:len(addrs)-1]
	}
	if len(addrs) == 0 {
		return nil, "", false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	p, err := u.process(pid, exec)
	if err != nil {
		// Without mappings nothing past the instruction pointer can be
		// told true.
		if os.IsNotExist(err) {
			return []stall.Frame{{Addr: addrs[0]}}, NoteExited, false
		}
		return []stall.Frame{{Addr: addrs[0]}}, fmt.Sprintf("cannot read the mappings of pid %d: %v", pid, err), false
	}
	w := &walk{u: u, pid: pid, proc: p, deadline: u.now().Add(u.wait), used: map[*elfFile]bool{}}
	frames, note = w.stack(addrs, regs)
	return frames, note, w.partial
}

// process returns the cached mappings of pid, reading them if needed:
// the first time, or when the stack is of a later exec than they are.
func (u *User) process(pid uint32, exec uint64) (*process, error) {
	if p, ok := u.procs.get(pid); ok {
		if exec == 0 || p.exec == exec {
			return p, nil
		}
		if p.exec == 0 { // read before its exec was known: this one's
			p.exec = exec
			return p, nil
		}
	}
	p, err := u.readProcess(pid)
	if err != nil {
		return nil, err
	}
	p.exec = exec
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
