package run

import "testing"

// Each percentile goes by its name and comes back from it; the zero
// value is p99, the default, and a name none has is refused.
func TestPercentileNames(t *testing.T) {
	if Percentile(0) != P99 || P99.String() != "p99" {
		t.Errorf("the zero percentile is %q, want p99", Percentile(0))
	}
	seen := map[string]bool{}
	for p := P99; p < numPercentiles; p++ {
		name := p.String()
		if back, ok := ParsePercentile(name); !ok || back != p || seen[name] {
			t.Errorf("%d: %q reads back as %d, %v", p, name, back, ok)
		}
		seen[name] = true
	}
	for _, bad := range []string{"p95", "", "P99"} {
		if _, ok := ParsePercentile(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}
