package stall

// ProbeStatus says whether one probe attached on this kernel, and if not,
// why. The tracer reports it, recordings keep it in their header, and the
// reports, the view and the exporter show it.
type ProbeStatus struct {
	Name        string   `json:"name"`
	Cause       string   `json:"cause,omitempty"` // the cause it feeds; "" for system-wide counters
	Description string   `json:"description,omitempty"`
	Tracepoints []string `json:"tracepoints,omitempty"`
	Programs    []string `json:"programs,omitempty"` // the program variants chosen for this kernel
	Attached    bool     `json:"attached"`
	Error       string   `json:"error,omitempty"`
}

// Attached counts the probes that attached.
func Attached(probes []ProbeStatus) int {
	n := 0
	for _, p := range probes {
		if p.Attached {
			n++
		}
	}
	return n
}
