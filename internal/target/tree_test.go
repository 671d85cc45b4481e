package target

import (
	"context"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// proc adds /proc/<pid>/stat with a parent and a state, as the kernel
// writes it (a comm may hold spaces and parentheses).
func proc(t *testing.T, root string, pid, ppid int, comm string, state byte) {
	t.Helper()
	write(t, filepath.Join(root, strconv.Itoa(pid), "stat"),
		strconv.Itoa(pid)+" ("+comm+") "+string(state)+" "+strconv.Itoa(ppid)+" 1 1 0 -1 4194560 100 0 0 0 0 0\n")
}

func TestDescendantsWalksTheTree(t *testing.T) {
	root := t.TempDir()
	task(t, root, fakePID, fakePID, "postgres", 'S')
	proc(t, root, fakePID, 1, "postgres", 'S')
	proc(t, root, 100, fakePID, "postgres: walwriter", 'S')
	proc(t, root, 101, fakePID, "a) Z 1 (odd", 'R') // a comm that looks like stat fields
	proc(t, root, 200, 101, "worker", 'S')          // a grandchild
	proc(t, root, 201, 200, "worker", 'D')          // and its child
	proc(t, root, 102, fakePID, "gone", 'Z')        // a zombie child: exited already
	proc(t, root, 400, 1, "unrelated", 'S')
	proc(t, root, 401, 400, "unrelated child", 'S')
	write(t, filepath.Join(root, "self", "stat"), "not a pid dir\n")
	write(t, filepath.Join(root, "500", "stat"), "500 (broken\n") // unreadable: skipped

	tg, err := Resolve(root, "", fakePID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tg.Descendants()
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{100, 101, 200, 201}; !reflect.DeepEqual(sorted(got), want) {
		t.Errorf("Descendants = %v, want %v", got, want)
	}
}

// A target that shows up as its own descendant's child (pids reused
// while /proc was read) does not loop the walk.
func TestDescendantsSurvivesALoop(t *testing.T) {
	root := t.TempDir()
	task(t, root, fakePID, fakePID, "x", 'S')
	proc(t, root, fakePID, 12, "x", 'S')
	proc(t, root, 12, fakePID, "c", 'S')
	proc(t, root, 13, 12, "d", 'S')
	tg, err := Resolve(root, "", fakePID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []uint32)
	go func() {
		got, _ := tg.Descendants()
		done <- got
	}()
	select {
	case got := <-done:
		if want := []uint32{12, 13}; !reflect.DeepEqual(sorted(got), want) {
			t.Errorf("Descendants = %v, want %v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the walk loops")
	}
}

func TestEndedNamesWhatTheTargetRanLast(t *testing.T) {
	tg := &Target{Kind: Process, ID: 42, Comm: "sh"}
	for _, c := range []struct{ comm, want string }{
		{"", "pid 42 (sh)"},
		{"sh", "pid 42 (sh)"},
		{"cat", "pid 42 (cat, was sh at attach)"},
	} {
		if got := tg.Ended(c.comm); got != c.want {
			t.Errorf("Ended(%q) = %q, want %q", c.comm, got, c.want)
		}
	}
	tg.Children = true
	if got, want := tg.Ended("postgres"), "pid 42 (postgres, was sh at attach) and its descendants"; got != want {
		t.Errorf("tree: Ended = %q, want %q", got, want)
	}
	if got, want := tg.String(), "pid 42 (sh) and its descendants"; got != want {
		t.Errorf("tree: String = %q, want %q", got, want)
	}
	th := &Target{Kind: Thread, ID: 43, Comm: "java"}
	if got, want := th.Ended("GC Thread#0"), "tid 43 (GC Thread#0, was java at attach)"; got != want {
		t.Errorf("thread: Ended = %q, want %q", got, want)
	}
}

// A tree is gone once its root has exited and so has every member the
// kernel followed, a child reparented to init too.
func TestWaitTreeGone(t *testing.T) {
	root := t.TempDir()
	task(t, root, fakePID, fakePID, "postgres", 'S')
	proc(t, root, 4194320, 1, "backend", 'S') // reparented: /proc no longer links it
	tg, err := Resolve(root, "", fakePID, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	members := func() ([]uint32, error) { return []uint32{4194320, 4194321}, nil } // 4194321 exited long ago
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gone := tg.WaitTreeGone(ctx, members)
	setState(t, root, fakePID, "postgres", 'Z')
	select {
	case <-gone:
		t.Fatal("gone while a member still runs")
	case <-time.After(700 * time.Millisecond):
	}
	proc(t, root, 4194320, 1, "backend", 'Z')
	select {
	case <-gone:
	case <-ctx.Done():
		t.Fatal("not gone after every member exited")
	}
}
