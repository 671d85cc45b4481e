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

// kernelSet stands in for the kernel's set of a tree: the fork probe
// adds a child of a member; the walk adds what it found.
type kernelSet map[uint32]bool

func (k kernelSet) add(pids []uint32) (int, error) {
	n := 0
	for _, p := range pids {
		if !k[p] {
			k[p], n = true, n+1
		}
	}
	return n, nil
}

// A child forked between the walk of /proc and the adding of its parent
// (whose forks the kernel did not follow yet) is found by the next walk;
// one that finds nothing new ends it.
func TestAddTreeWalksUntilNothingIsMissed(t *testing.T) {
	set := kernelSet{}
	walks := 0
	walk := func() ([]uint32, error) {
		walks++
		switch walks {
		case 1:
			return []uint32{10, 11}, nil
		default:
			// 11 forked 12 before it was added; 10 forked 13 after it
			// was, which the kernel saw.
			set[13] = true
			return []uint32{10, 11, 12, 13}, nil
		}
	}
	if err := addTree(walk, set.add); err != nil {
		t.Fatal(err)
	}
	if walks != 3 || !reflect.DeepEqual(set, kernelSet{10: true, 11: true, 12: true, 13: true}) {
		t.Errorf("%d walks, set %v: want 3 walks and all four", walks, set)
	}
}

func TestAddTreeGivesUpOnATreeThatNeverSettles(t *testing.T) {
	next := uint32(100)
	walk := func() ([]uint32, error) { next++; return []uint32{next}, nil }
	err := addTree(walk, kernelSet{}.add)
	if err == nil || !strings.Contains(err.Error(), "kept changing over 8 walks") {
		t.Errorf("err %v", err)
	}
	bad := errors.New("no /proc")
	if err := addTree(func() ([]uint32, error) { return nil, bad }, kernelSet{}.add); !errors.Is(err, bad) {
		t.Errorf("walk error: %v", err)
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
