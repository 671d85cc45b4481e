package output

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/numatrace/numatrace/internal/psi"
	"github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// pressureJSON is one PSI scope beside numatrace's own figure.
type pressureJSON struct {
	Scope       string   `json:"scope"`
	FromNs      uint64   `json:"from_ns"`
	ToNs        uint64   `json:"to_ns"`
	SomeNs      uint64   `json:"some_ns"`
	FullNs      uint64   `json:"full_ns"`
	NumatraceNs uint64   `json:"numatrace_ns"`
	Explained   *float64 `json:"explained,omitempty"` // numatrace_ns over some_ns, at most 1
	Error       string   `json:"error,omitempty"`
}

func pressuresJSON(ps []run.Pressure, ours uint64) []pressureJSON {
	var out []pressureJSON
	for _, p := range ps {
		j := pressureJSON{Scope: p.Scope, FromNs: p.FromNs, ToNs: p.ToNs, SomeNs: p.SomeNs, FullNs: p.FullNs,
			NumatraceNs: ours, Error: p.Err}
		if p.Err == "" && p.SomeNs > 0 {
			share := psi.Explained(time.Duration(p.SomeNs), time.Duration(ours))
			j.Explained = &share
		}
		out = append(out, j)
	}
	return out
}

// PressureSentence is one scope's PSI beside numatrace's union of memory
// stall time, as the report and the view say it.
func PressureSentence(p run.Pressure, oursNs uint64) string {
	sp := psi.Span{Scope: psi.Scope{Name: p.Scope}, From: p.FromNs, To: p.ToNs,
		Growth: psi.Totals{Some: time.Duration(p.SomeNs), Full: time.Duration(p.FullNs)}}
	if p.Err != "" {
		sp.Err = errors.New(p.Err)
	}
	return sp.Sentence(time.Duration(oursNs))
}

// pressure sets what the kernel's PSI counted beside numatrace's figure.
func (r *Report) pressure(w io.Writer) {
	if len(r.Pressure) == 0 {
		return
	}
	fmt.Fprintf(w, "\nMEMORY PRESSURE (PSI \"some\" over the run; numatrace: the union of the target's memory stalls, %s)\n",
		Dur(r.Summary.MemoryStallNs))
	for _, p := range r.Pressure {
		fmt.Fprintf(w, "  %s\n", sanitize.Text(PressureSentence(p, r.Summary.MemoryStallNs)))
	}
}
