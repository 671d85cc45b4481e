//go:build linux

package live

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/target"
	"github.com/numatrace/numatrace/internal/topology"
	"github.com/numatrace/numatrace/internal/tracer"
)

// fakeTree is /proc as a sequence of walks, and the kernel's set of the
// tree beside it: the fork probe adds a member's children as it forks
// them; the walk adds what it found.
type fakeTree struct {
	walks [][]uint32
	n     int
	dead  map[uint32]bool
	set   map[uint32]bool
}

func (f *fakeTree) Descendants() ([]uint32, error) {
	w := f.walks[min(f.n, len(f.walks)-1)]
	f.n++
	return w, nil
}

func (f *fakeTree) Alive(pid uint32) bool { return !f.dead[pid] }

func (f *fakeTree) AddDescendants(pids []uint32) ([]uint32, error) {
	var added []uint32
	for _, p := range pids {
		if !f.set[p] {
			f.set[p] = true
			added = append(added, p)
		}
	}
	return added, nil
}

func (f *fakeTree) DropDescendants(pids []uint32) error {
	for _, p := range pids {
		delete(f.set, p)
	}
	return nil
}

// A child forked between the walk of /proc and the adding of its parent
// (whose forks the kernel did not follow yet) is found by the next walk;
// one that finds nothing new ends it.
func TestAddTreeWalksUntilNothingIsMissed(t *testing.T) {
	// 11 forked 12 before it was added; 10 forked 13 after it was,
	// which the kernel saw.
	f := &fakeTree{walks: [][]uint32{{10, 11}, {10, 11, 12, 13}}, set: map[uint32]bool{13: true}}
	if err := addTree(f, f); err != nil {
		t.Fatal(err)
	}
	if f.n != 3 || !reflect.DeepEqual(f.set, map[uint32]bool{10: true, 11: true, 12: true, 13: true}) {
		t.Errorf("%d walks, set %v: want 3 walks and all four", f.n, f.set)
	}
}

// A process that exited before it could be added leaves the set again,
// and does not count as new: a tree of short-lived children settles.
func TestAddTreeDropsWhatExitedMeanwhile(t *testing.T) {
	f := &fakeTree{walks: [][]uint32{{10, 20}, {10, 21}, {10, 22}}, dead: map[uint32]bool{20: true, 21: true, 22: true},
		set: map[uint32]bool{}}
	if err := addTree(f, f); err != nil {
		t.Fatal(err)
	}
	if f.n != 2 || !reflect.DeepEqual(f.set, map[uint32]bool{10: true}) {
		t.Errorf("%d walks, set %v: want 2 walks and only the live 10", f.n, f.set)
	}
}

func TestAddTreeGivesUpOnATreeThatNeverSettles(t *testing.T) {
	var walks [][]uint32
	for i := range 20 {
		walks = append(walks, []uint32{uint32(100 + i)})
	}
	f := &fakeTree{walks: walks, set: map[uint32]bool{}}
	if err := addTree(f, f); !errors.Is(err, errTreeUnsettled) || !strings.Contains(err.Error(), "kept changing over 8 walks") {
		t.Errorf("err %v", err)
	}
}

// --children needs --pid; --pid alone watches the descendants for the
// hint, --children traces them, following forks.
func TestChildrenConfig(t *testing.T) {
	a := Attach{Command: "record", RecordTo: "x.ntr", Trace: validTrace(), SpikeK: 2, Children: true}
	if err := a.Check(); err == nil || !IsBadInput(err) || err.Error() != "record: --children (-f) follows the descendants of a --pid process: give --pid" {
		t.Errorf("--children without --pid: %v", err)
	}
	a.PID = 42
	if err := a.Check(); err != nil {
		t.Errorf("--children --pid: %v", err)
	}
	topo := &topology.Topology{}
	for _, children := range []bool{false, true} {
		cfg, err := (&Attach{}).tracerConfig(&target.Target{Kind: target.Process, ID: 42, Children: children}, topo)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Filter != tracer.FilterPIDs || !reflect.DeepEqual(cfg.PIDs, []uint32{42}) ||
			cfg.FollowForks != children || cfg.WatchChildren == children {
			t.Errorf("children %v: config %+v", children, cfg)
		}
	}
}
