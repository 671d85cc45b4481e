package symbolize

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

const (
	// DefaultBudget bounds the memory the symbolizer's file tables take
	// together: past it, the least recently used files are let go.
	DefaultBudget = 256 << 20
	// fileShare is the part of the budget one file may take: a file
	// whose tables need more has the largest left out, and says so.
	fileShare = 4
	// codeMemoBytes is what a file's remembered code facts may take.
	codeMemoBytes = 2 * maxCodeMemo * 48
	// maxLoading bounds the files being read at once, queued or not.
	maxLoading = 64
)

// fileKey names a file across processes and mount namespaces: the
// device and inode its mappings show.
type fileKey struct {
	major, minor uint32
	inode        uint64
}

// fileCache keeps the tables of the files stacks were taken in, each
// file held open, within a budget of bytes: past it, the least recently
// used are closed and forgotten (a later stack reads them again, from a
// process that still maps them).
type fileCache struct {
	budget int64
	used   int64
	order  *list.List // of *cachedFile, most recent first
	items  map[fileKey]*list.Element
}

type cachedFile struct {
	key fileKey
	ef  *elfFile
}

func newFileCache(budget int64) *fileCache {
	return &fileCache{budget: budget, order: list.New(), items: make(map[fileKey]*list.Element)}
}

func (c *fileCache) get(k fileKey) (*elfFile, bool) {
	e, ok := c.items[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedFile).ef, true
}

// put adds ef, then lets go of the least recently used files, but never
// of keep (the files of the walk in progress), until the budget holds.
func (c *fileCache) put(k fileKey, ef *elfFile, keep map[*elfFile]bool) {
	if e, ok := c.items[k]; ok {
		c.remove(e)
	}
	c.items[k] = c.order.PushFront(&cachedFile{key: k, ef: ef})
	c.used += ef.cost()
	for e := c.order.Back(); e != nil && c.used > c.budget; {
		prev := e.Prev()
		if cf := e.Value.(*cachedFile); !keep[cf.ef] && cf.ef != ef {
			c.remove(e)
		}
		e = prev
	}
}

func (c *fileCache) remove(e *list.Element) {
	cf := e.Value.(*cachedFile)
	c.order.Remove(e)
	delete(c.items, cf.key)
	c.used -= cf.ef.cost()
	cf.ef.close()
}

// closeAll lets go of every file.
func (c *fileCache) closeAll() {
	for e := c.order.Front(); e != nil; e = c.order.Front() {
		c.remove(e)
	}
}

// cost is what ef takes of the budget.
func (ef *elfFile) cost() int64 { return ef.bytes + codeMemoBytes }

// loading is a file being read off the stream's goroutine.
type loading struct {
	done chan struct{}
	ef   *elfFile
	err  error
}

// errStillReading is why a frame has no name yet: its file's tables
// were still being read when its stack was made.
var errStillReading = errors.New("its file's tables were still being read")

// startLoad reads the file f (of key) in the background, one file at a
// time: the memory of one parse at most is in flight.
func (u *User) startLoad(k fileKey, f *os.File) (*loading, error) {
	if len(u.loading) >= maxLoading {
		f.Close()
		return nil, fmt.Errorf("%d files are being read already", len(u.loading))
	}
	l := &loading{done: make(chan struct{})}
	u.loading[k] = l
	limit := u.files.budget / fileShare
	go func() {
		u.parsing <- struct{}{}
		defer func() { <-u.parsing }()
		l.ef, l.err = loadELF(f, limit)
		if l.err != nil {
			f.Close()
		}
		close(l.done)
	}()
	return l, nil
}

// finish takes a load that is done into the cache: a file that could
// not be read is kept as one with no tables, not read again.
func (u *User) finish(k fileKey, l *loading, keep map[*elfFile]bool) *elfFile {
	delete(u.loading, k)
	ef := l.ef
	if l.err != nil {
		ef = &elfFile{code: newCodeCache(), left: l.err.Error()}
	}
	u.files.put(k, ef, keep)
	return ef
}

// await waits for l until deadline; false if it is not done by then.
func await(l *loading, deadline time.Time) bool {
	select {
	case <-l.done:
		return true
	default:
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-l.done:
		return true
	case <-t.C:
		return false
	}
}

// file is the ELF file behind m in pid, read if it is not yet; nil if it
// cannot be read as the one mapped, or was not read by deadline (then
// why says so).
func (w *walk) file(m *mapping) (*elfFile, error) {
	u := w.u
	k, ok := m.key()
	if !ok || len(m.path) > 0 && m.path[0] == '[' { // [vdso], [vsyscall]: no file
		return nil, nil
	}
	if ef, ok := u.files.get(k); ok {
		w.used[ef] = true
		return ef, nil
	}
	if m.unreadable != nil {
		return nil, m.unreadable
	}
	l, ok := u.loading[k]
	if !ok {
		f, err := u.openMapped(w.pid, m)
		if err != nil {
			m.unreadable = fmt.Errorf("%s: %w", filepath.Base(m.path), err)
			return nil, m.unreadable
		}
		if l, err = u.startLoad(k, f); err != nil {
			return nil, err
		}
	}
	if !await(l, w.deadline) {
		w.partial = true
		return nil, errStillReading
	}
	ef := u.finish(k, l, w.used)
	w.used[ef] = true
	return ef, nil
}
