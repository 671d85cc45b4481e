package wire

import "github.com/numatrace/numatrace/internal/stall"

// ProbeStatus is one probe's status as a recording's header, the JSON
// summary, the Perfetto metadata and `probes --json` write it. Its fields
// are stall.ProbeStatus's, the cause by its name:
// TestProbeStatusAsTheFormatsWriteIt fails for a field added there until
// the formats say how to write it.
type ProbeStatus struct {
	Name        string   `json:"name"`
	Cause       string   `json:"cause,omitempty"` // the cause it feeds; "" for system-wide counters
	Description string   `json:"description,omitempty"`
	Tracepoints []string `json:"tracepoints,omitempty"`
	Programs    []string `json:"programs,omitempty"` // the program variants chosen for this kernel
	Attached    bool     `json:"attached"`
	Skipped     bool     `json:"skipped,omitempty"` // left out on purpose, not a failure
	Error       string   `json:"error,omitempty"`
}

// NewProbe is p in the formats' shape.
func NewProbe(p stall.ProbeStatus) ProbeStatus {
	w := ProbeStatus{Name: p.Name, Description: p.Description, Tracepoints: p.Tracepoints, Programs: p.Programs,
		Attached: p.Attached, Skipped: p.Skipped, Error: p.Error}
	if p.Feeds {
		w.Cause = p.Cause.String()
	}
	return w
}

// Status is the status w holds. A cause name this version does not know
// (a newer writer's cause) feeds no cause it knows, as its events are
// left out.
func (w ProbeStatus) Status() stall.ProbeStatus {
	p := stall.ProbeStatus{Name: w.Name, Description: w.Description, Tracepoints: w.Tracepoints, Programs: w.Programs,
		Attached: w.Attached, Skipped: w.Skipped, Error: w.Error}
	if c, err := stall.ParseCause(w.Cause); err == nil {
		p.Cause, p.Feeds = c, true
	}
	return p
}

// NewProbes is ps in the formats' shape; nil stays nil (the header
// writes null for it).
func NewProbes(ps []stall.ProbeStatus) []ProbeStatus {
	if ps == nil {
		return nil
	}
	out := make([]ProbeStatus, len(ps))
	for i, p := range ps {
		out[i] = NewProbe(p)
	}
	return out
}

// ProbeStatuses are the statuses ps holds.
func ProbeStatuses(ps []ProbeStatus) []stall.ProbeStatus {
	if ps == nil {
		return nil
	}
	out := make([]stall.ProbeStatus, len(ps))
	for i, p := range ps {
		out[i] = p.Status()
	}
	return out
}
