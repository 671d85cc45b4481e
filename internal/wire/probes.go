package wire

import "github.com/numatrace/numatrace/internal/stall"

// ProbeStatus is one probe's status as a recording's header, the JSON
// summary, the Perfetto metadata and `probes --json` write it. Its fields
// are stall.ProbeStatus's, so that the two convert into each other: a
// field added there fails to compile here until the formats say how to
// write it.
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

// NewProbes is ps in the formats' shape; nil stays nil (the header
// writes null for it).
func NewProbes(ps []stall.ProbeStatus) []ProbeStatus {
	if ps == nil {
		return nil
	}
	out := make([]ProbeStatus, len(ps))
	for i, p := range ps {
		out[i] = ProbeStatus(p)
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
		out[i] = stall.ProbeStatus(p)
	}
	return out
}
