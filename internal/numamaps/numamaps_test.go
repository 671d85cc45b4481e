package numamaps

import (
	"strings"
	"testing"
)

const sample = `55d4c6a00000 default file=/usr/bin/redis-server mapped=300 N0=300 kernelpagesize_kB=4
55d4c8000000 default heap anon=1000 dirty=1000 N0=600 N1=400 kernelpagesize_kB=4
7f0000000000 interleave:0-1 anon=2048 dirty=2048 N0=1024 N1=1024 kernelpagesize_kB=4
7f2000000000 bind:1 file=/dev/hugepages/x huge dirty=3 N1=3 kernelpagesize_kB=2048
7ffc00000000 default stack anon=33 dirty=33 N0=33 kernelpagesize_kB=4
7ffd00000000 default
`

// parse parses every line of text, and sums them.
func parse(text string) ([]Mapping, Summary, error) {
	var ms []Mapping
	var s Summary
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		m, err := ParseLine(line)
		if err != nil {
			return nil, s, err
		}
		if err := s.Add(m); err != nil {
			return nil, s, err
		}
		ms = append(ms, m)
	}
	return ms, s, nil
}

func TestParse(t *testing.T) {
	ms, s, err := parse(sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 6 || s.Mappings != 6 {
		t.Fatalf("%d mappings (summed %d), want 6", len(ms), s.Mappings)
	}
	want := []struct {
		policy string
		kind   Kind
		n0, n1 int64
	}{
		{"default", File, 300, 0}, {"default", Heap, 600, 400}, {"interleave:0-1", Private, 1024, 1024},
		{"bind:1", Huge, 0, 3 * 512}, {"default", Stack, 33, 0}, {"default", Private, 0, 0},
	}
	for i, w := range want {
		m := ms[i]
		if m.Policy != w.policy || m.Kind != w.kind || m.Pages[0] != w.n0 || m.Pages[1] != w.n1 {
			t.Errorf("line %d: %+v, want %+v", i+1, m, w)
		}
	}
	if got := s.PerNode(); got[0] != 300+600+1024+33 || got[1] != 400+1024+1536 {
		t.Errorf("per node %v", got)
	}
	if s.Total() != 300+600+1024+33+400+1024+1536 || s.Kinds[Huge][1] != 1536 || s.Kinds[Heap][0] != 600 {
		t.Errorf("total %d, kinds %v", s.Total(), s.Kinds)
	}
	if s.Interleave != "interleave:0-1" || s.InterleavePages != 2048 || len(s.Bind) != 1 || !s.Bind[1] {
		t.Errorf("interleave %q %d, bind %v", s.Interleave, s.InterleavePages, s.Bind)
	}
}

func TestParseRejectsBadCounts(t *testing.T) {
	for _, bad := range []string{"1 default N0=x", "1 default N0=1 kernelpagesize_kB=0", "1", "1 default N1024=1",
		"1 default N0=9223372036854775807 kernelpagesize_kB=4", "1 bind:0-99999999 N0=1"} {
		if _, _, err := parse(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
