package latency

// Clock maps a sample's timestamp to CLOCK_MONOTONIC. Timestamps above
// 10^17 ns (after 1973) are Unix-epoch times, as load generators and
// access logs write them; smaller ones are taken as CLOCK_MONOTONIC.
type Clock struct {
	WallNs int64 // a Unix time...
	MonoNs int64 // ...and CLOCK_MONOTONIC at the same moment
}

const epochThreshold = 1e17

// Mono converts ts to CLOCK_MONOTONIC ns.
func (c Clock) Mono(ts uint64) uint64 {
	if ts < epochThreshold {
		return ts
	}
	m := int64(ts) - c.WallNs + c.MonoNs
	if m < 0 {
		return 0
	}
	return uint64(m)
}
