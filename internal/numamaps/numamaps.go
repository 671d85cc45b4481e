// Package numamaps parses /proc/PID/numa_maps: each mapping's memory
// policy, what kind of memory it is, and its pages per NUMA node.
// github.com/prometheus/procfs has no parser for it.
package numamaps

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Kind is what a mapping holds, as numastat -p splits it.
type Kind int

const (
	Private Kind = iota // anonymous memory that is not heap or stack
	Heap
	Stack
	File
	Huge // explicit huge pages (hugetlbfs)
	NumKinds
)

func (k Kind) String() string {
	return [NumKinds]string{"private", "heap", "stack", "file", "huge"}[k]
}

// BasePageKB is the unit of Pages: 4 KiB base pages.
const BasePageKB = 4

// Mapping is one line of numa_maps.
type Mapping struct {
	Policy string // default, bind:0, interleave:0-1, prefer:1, preferred-many, local
	Kind   Kind
	File   string
	// Pages per node, in 4 KiB base pages (a 2 MiB huge page counts 512).
	Pages map[int]int64
}

// Parse reads numa_maps lines such as
//
//	7f1200000000 default file=/lib/x.so anon=512 dirty=512 N0=300 N1=212 kernelpagesize_kB=4
//
// The kernel prints kernelpagesize_kB after the node counts on every line
// that has any; a line without it is taken as 4 KiB pages.
func Parse(r io.Reader) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("numa_maps line %d: want an address and a policy, got %q", n, sc.Text())
		}
		m := Mapping{Policy: f[1], Pages: map[int]int64{}}
		pageKB := int64(BasePageKB)
		counts := map[int]int64{}
		for _, tok := range f[2:] {
			k, v, ok := strings.Cut(tok, "=")
			if !ok {
				switch tok {
				case "heap":
					m.Kind = Heap
				case "stack":
					m.Kind = Stack
				case "huge":
					m.Kind = Huge
				}
				continue
			}
			switch {
			case k == "file":
				m.File = v
			case k == "kernelpagesize_kB":
				kb, err := strconv.ParseInt(v, 10, 64)
				if err != nil || kb <= 0 {
					return nil, fmt.Errorf("numa_maps line %d: bad %q", n, tok)
				}
				pageKB = kb
			case len(k) > 1 && k[0] == 'N':
				node, err := strconv.Atoi(k[1:])
				if err != nil || node < 0 {
					continue // not a node count
				}
				c, err := strconv.ParseInt(v, 10, 64)
				if err != nil || c < 0 {
					return nil, fmt.Errorf("numa_maps line %d: bad %q", n, tok)
				}
				counts[node] = c
			}
		}
		if m.Kind == Private && m.File != "" {
			m.Kind = File
		}
		for node, c := range counts {
			m.Pages[node] = c * pageKB / BasePageKB
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// PerNode sums the pages of every mapping by node.
func PerNode(ms []Mapping) map[int]int64 {
	out := map[int]int64{}
	for _, m := range ms {
		for n, p := range m.Pages {
			out[n] += p
		}
	}
	return out
}
