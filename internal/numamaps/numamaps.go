// Package numamaps parses /proc/PID/numa_maps: each mapping's memory
// policy, what kind of memory it is, and its pages per NUMA node.
// github.com/prometheus/procfs has no parser for it.
//
// A numa_maps has a line per mapping, and a process may have hundreds of
// thousands of them: lines are parsed one at a time (ParseLine) and summed
// into a Summary, whose size depends on the number of nodes only.
package numamaps

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/topology"
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

// maxPages bounds the sums of a Summary: 2^50 base pages are 4 EiB, more
// than a 64-bit machine can address, so no real count comes near it and
// no sum of them overflows.
const maxPages = 1 << 50

// MaxNodes bounds node numbers: the kernel allows at most 1024 nodes
// (NODES_SHIFT is at most 10).
const MaxNodes = 1024

// Mapping is one line of numa_maps.
type Mapping struct {
	Policy string // default, bind:0, interleave:0-1, prefer:1, bind=static:0, local
	Kind   Kind
	File   string
	// Pages per node, in 4 KiB base pages (a 2 MiB huge page counts 512).
	Pages map[int]int64
}

// ParseLine parses one numa_maps line such as
//
//	7f1200000000 default file=/lib/x.so anon=512 dirty=512 N0=300 N1=212 kernelpagesize_kB=4
//
// The kernel prints kernelpagesize_kB after the node counts on every line
// that has any; a line without it is taken as 4 KiB pages. Errors quote
// no more of the line than the token at fault.
func ParseLine(line string) (Mapping, error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return Mapping{}, fmt.Errorf("want an address and a policy, got %d field(s)", len(f))
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
			if err != nil || kb < BasePageKB || kb > 16<<20 { // 4 KiB to 16 GiB pages
				return Mapping{}, fmt.Errorf("bad kernelpagesize_kB %s", excerpt(v))
			}
			pageKB = kb
		case len(k) > 1 && k[0] == 'N':
			node, err := strconv.Atoi(k[1:])
			if err != nil || node < 0 {
				continue // not a node count
			}
			if node >= MaxNodes {
				return Mapping{}, fmt.Errorf("node %d: above the kernel's %d nodes", node, MaxNodes)
			}
			c, err := strconv.ParseInt(v, 10, 64)
			if err != nil || c < 0 {
				return Mapping{}, fmt.Errorf("bad page count %s for node %d", excerpt(v), node)
			}
			counts[node] = c
		}
	}
	if m.Kind == Private && m.File != "" {
		m.Kind = File
	}
	for node, c := range counts {
		if c > maxPages/(pageKB/BasePageKB) {
			return Mapping{}, fmt.Errorf("page count %d of %d kB pages on node %d: more memory than any machine has", c, pageKB, node)
		}
		m.Pages[node] = c * pageKB / BasePageKB
	}
	return m, nil
}

func excerpt(s string) string {
	if len(s) > 24 {
		s = s[:24] + "…"
	}
	return strconv.QuoteToASCII(s)
}

// Summary is a process's mappings summed: what every reader of numa_maps
// needs, in memory that does not grow with the number of mappings.
type Summary struct {
	Mappings int
	Kinds    [NumKinds]map[int]int64 // pages by kind, then node
	// Bind is the union of the nodes of every bind policy.
	Bind map[int]bool
	// Interleave is the first interleave policy, "" if none, and
	// InterleavePages the pages of every interleaved mapping.
	Interleave      string
	InterleavePages int64
	total           int64
}

// Add sums one mapping into s.
func (s *Summary) Add(m Mapping) error {
	s.Mappings++
	if s.Kinds[m.Kind] == nil {
		s.Kinds[m.Kind] = map[int]int64{}
	}
	var pages int64 // at most MaxNodes × maxPages: no overflow
	for _, p := range m.Pages {
		pages += p
	}
	if s.total+pages > maxPages {
		return fmt.Errorf("page counts add up to more than %d pages, more memory than any machine has", int64(maxPages))
	}
	s.total += pages
	for n, p := range m.Pages {
		s.Kinds[m.Kind][n] += p
	}
	name, list := Policy(m.Policy)
	switch {
	case name == "bind":
		nodes, err := topology.ParseList(list)
		if err != nil {
			return fmt.Errorf("policy %s: %w", excerpt(m.Policy), err)
		}
		if s.Bind == nil {
			s.Bind = map[int]bool{}
		}
		for _, n := range nodes {
			s.Bind[n] = true
		}
	case IsInterleave(m.Policy):
		if s.Interleave == "" {
			s.Interleave = m.Policy
		}
		s.InterleavePages += pages
	}
	return nil
}

// Policy splits a numa_maps policy into its name and node list:
// "bind:0-1" and "bind=static:0-1" are "bind" and "0-1"; "default" has
// no list.
func Policy(p string) (name, nodes string) {
	name, nodes, _ = strings.Cut(p, ":")
	name, _, _ = strings.Cut(name, "=")
	return name, nodes
}

// IsInterleave tells an interleave policy (weighted or not).
func IsInterleave(policy string) bool {
	name, _ := Policy(policy)
	return name == "interleave" || name == "weighted-interleave"
}

// PerNode is the pages of every kind by node.
func (s *Summary) PerNode() map[int]int64 {
	out := map[int]int64{}
	for _, k := range s.Kinds {
		for n, p := range k {
			out[n] += p
		}
	}
	return out
}

// Total is the pages of every kind on every node.
func (s *Summary) Total() int64 { return s.total }
