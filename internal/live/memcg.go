package live

import (
	"errors"
	"fmt"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/memcg"
	"github.com/numatrace/numatrace/internal/target"
)

// memoryCgroup reads the target's memory cgroup as tracing starts and as
// it ends, for the report's next step (run.Description's and run.End's
// MemoryCgroup). Its group is found once, at the start, and read by its
// directory: a process target has often exited by the end.
type memoryCgroup struct {
	root *hostfs.Root
	dir  string // "" when the target has none
}

// openMemoryCgroup finds the target's group: a process's or a thread's
// from /proc, a --cgroup directory itself; none system-wide. A target in
// no group with memory files has none, quietly; a group that cannot be
// read is said once.
func openMemoryCgroup(tgt *target.Target, warn func(error)) *memoryCgroup {
	m := &memoryCgroup{}
	var err error
	switch tgt.Kind {
	case target.Process, target.Thread:
		if m.root, err = hostfs.Open("/"); err == nil {
			m.dir, err = memcg.Find(m.root, int(tgt.ID))
		}
	case target.Cgroup:
		if m.root, err = hostfs.Open("/"); err == nil {
			m.dir = tgt.Path
		}
	}
	var none *memcg.NoGroupError
	if err != nil && !errors.As(err, &none) {
		warn(fmt.Errorf("the target's memory cgroup is not read: %w", err))
	}
	return m
}

// read is the group as it is now; nil when the target has none, or it
// cannot be read (gone since).
func (m *memoryCgroup) read() *memcg.Reading {
	if m.dir == "" {
		return nil
	}
	r, err := memcg.Dir(m.root, m.dir)
	if err != nil {
		return nil
	}
	return r
}

func (m *memoryCgroup) close() {
	if m.root != nil {
		m.root.Close()
	}
}
