package topology

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList("0-2,5,7-8")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 5, 7, 8}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for _, bad := range []string{"a", "3-1", "1-x", "1,,2", "0-70000", "65536", "0-65535,0-65535"} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) accepted", bad)
		}
	}
	// A list read from a copy of a machine is quoted in a short excerpt only.
	if _, err := ParseList(strings.Repeat("secret", 1000)); err == nil || len(err.Error()) > 80 || !strings.Contains(err.Error(), `"secretsecret`) {
		t.Errorf("a long bad list: %v", err)
	}
}

func TestReadTwoNodes(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "devices/system/node/node0/cpulist"), "0-1\n")
	write(t, filepath.Join(root, "devices/system/node/node1/cpulist"), "2-3\n")
	write(t, filepath.Join(root, "devices/system/node/node1/meminfo"), "Node 1 MemTotal:       1048576 kB\nNode 1 MemFree: 5 kB\n")
	write(t, filepath.Join(root, "devices/system/node/possible"), "0-1\n")
	topo, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(topo.Nodes, []int{0, 1}) {
		t.Fatalf("nodes %v", topo.Nodes)
	}
	for cpu, node := range map[int]int{0: 0, 1: 0, 2: 1, 3: 1, 9: -1} {
		if got := topo.NodeOf(cpu); got != node {
			t.Errorf("NodeOf(%d) = %d, want %d", cpu, got, node)
		}
	}
	if topo.NodeMem[1] != 1<<30 {
		t.Errorf("node1 mem %d", topo.NodeMem[1])
	}
}

func TestReadWithoutNUMA(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "devices/system/cpu/online"), "0-3\n")
	topo, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if topo.NumCPUs() != 4 || topo.NodeOf(3) != 0 || len(topo.Nodes) != 1 {
		t.Fatalf("unexpected %+v", topo)
	}
}

func TestReadThisMachine(t *testing.T) {
	topo, err := Read("/sys")
	if err != nil {
		t.Fatal(err)
	}
	if topo.NumCPUs() == 0 || len(topo.Nodes) == 0 {
		t.Fatalf("empty topology %+v", topo)
	}
}

func TestFormatListRoundTrips(t *testing.T) {
	for in, want := range map[string]string{
		"":           "",
		"3":          "3",
		"0-15,32-47": "0-15,32-47",
		"5,1,2,3,9":  "1-3,5,9",
		"0,0,1":      "0-1",
		"0,2,4":      "0,2,4",
	} {
		v, err := ParseList(in)
		if err != nil {
			t.Fatal(err)
		}
		// Shuffle-proof: the input order above is not always sorted.
		if got := FormatList(v); got != want {
			t.Errorf("FormatList(%q) = %q, want %q", in, got, want)
		}
	}
}
