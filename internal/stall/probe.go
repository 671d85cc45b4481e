package stall

// ProbeStatus says whether one probe attached on this kernel, and if not,
// why. The tracer reports it, recordings keep it in their header, and the
// reports, the view and the exporter show it; the formats write it as
// wire.ProbeStatus.
type ProbeStatus struct {
	Name string
	// Cause is the stall cause the probe feeds, when Feeds: system-wide
	// counters feed none. Its name is read and written only by the
	// formats (wire.ProbeStatus).
	Cause       Cause
	Feeds       bool
	Description string
	Tracepoints []string
	Programs    []string // the program variants chosen for this kernel
	Attached    bool
	// Skipped: left out on purpose (--causes, --no-causes), not a failure.
	Skipped bool
	Error   string
}

// Untraced marks the causes no attached probe fed. With no probe list at
// all, nothing is marked: the source did not say.
func Untraced(probes []ProbeStatus) (untraced [NumCauses]bool) {
	if len(probes) == 0 {
		return untraced
	}
	for i := range untraced {
		untraced[i] = true
	}
	for _, p := range probes {
		if c, ok := p.fed(); ok && p.Attached {
			untraced[c] = false
		}
	}
	return untraced
}

// fed is the cause the probe feeds. Recordings before 1.3 did not say:
// their probes of a cause were named after it.
func (p *ProbeStatus) fed() (Cause, bool) {
	if p.Feeds {
		return p.Cause, true
	}
	c, err := ParseCause(p.Name)
	return c, err == nil
}

// Asked counts the probes that were to attach: all but those left out
// on purpose.
func Asked(probes []ProbeStatus) int {
	n := 0
	for _, p := range probes {
		if !p.Skipped {
			n++
		}
	}
	return n
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
