//go:build linux

package tracer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// Task migrations are the hottest hook there is, and the kernel already
// counts them per thread (task->se.nr_migrations). So numatrace reads those
// counts with a task iterator (migrations_dump) when it takes a snapshot,
// less the counts at attach, and sched_migrate_task only counts moves to
// another node. Where the iterator cannot load, task_migrate_count counts
// every migration on the hook instead.

// The programs outside probeDefs: the iterator, and the hook's fallback,
// in the task_migration probe's object.
const (
	migrationsObject   = "sched"
	progMigrationsIter = schedProgMigrationsDump
	progMigrateCount   = schedProgTaskMigrateCount
)

type migrKey struct {
	tid     uint32
	startNs uint64
}

// openMigrationsIter loads and links the iterator, or says why it cannot.
func (t *Tracer) openMigrationsIter(spec *ebpf.CollectionSpec, kspec *btf.Spec) error {
	coll, err := t.loadPrograms(spec, kspec, progMigrationsIter)
	if err != nil {
		return fmt.Errorf("load %s: %w", progMigrationsIter, err)
	}
	l, err := link.AttachIter(link.IterOptions{Program: coll.Programs[progMigrationsIter]})
	if err != nil {
		coll.Close()
		return fmt.Errorf("link %s: %w", progMigrationsIter, err)
	}
	t.colls = append(t.colls, coll)
	t.migrIter = l
	return nil
}

// readMigrations runs the iterator once: every live traced thread that
// has migrated since it started.
func (t *Tracer) readMigrations() ([]typesMigrRec, error) {
	rd, err := t.migrIter.Open()
	if err != nil {
		return nil, fmt.Errorf("run migrations iterator: %w", err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("read migrations iterator: %w", err)
	}
	size := binary.Size(typesMigrRec{})
	if len(b)%size != 0 {
		return nil, fmt.Errorf("migrations iterator wrote %d bytes, not records of %d", len(b), size)
	}
	out := make([]typesMigrRec, len(b)/size)
	if err := binary.Read(bytes.NewReader(b), binary.LittleEndian, out); err != nil {
		return nil, err
	}
	return out, nil
}

// takeMigrationBase remembers each live thread's count at attach, so
// snapshots count only the migrations while tracing.
func (t *Tracer) takeMigrationBase() error {
	recs, err := t.readMigrations()
	if err != nil {
		return err
	}
	t.migrBase = make(map[migrKey]uint64, len(recs))
	for _, r := range recs {
		t.migrBase[migrKey{r.Tid, r.StartNs}] = r.NrMigrations
	}
	return nil
}

// sinceAttach is a thread's migrations since numatrace attached.
func (t *Tracer) sinceAttach(tid uint32, startNs, total uint64) uint64 {
	base := t.migrBase[migrKey{tid, startNs}]
	if total < base {
		return 0
	}
	return total - base
}
