package wire

import "github.com/numatrace/numatrace/internal/latency"

// skipKeys name the kinds of input a source skipped where JSON writes
// them: the recording's end record (latency.skipped[].kind) and the JSON
// summary (latency_input.skipped's keys). They are the formats' and stay
// as they are when a kind's words for people change.
var skipKeys = [latency.NumSkipKinds]string{
	latency.SkipMalformed:  "malformed_lines",
	latency.SkipNoLatency:  "lines_without_a_latency",
	latency.SkipScrapes:    "failed_scrapes",
	latency.SkipResets:     "counter_resets",
	latency.SkipLayouts:    "bucket_layout_changes",
	latency.SkipPipelined:  "pipelined_exchanges",
	latency.SkipLateWrites: "late_writes",
	latency.SkipDueWaits:   "counted_from_due",
}

// SkipKey is s's kind as the formats write it; a kind this version does
// not know keeps the name it came with.
func SkipKey(s latency.Skip) string {
	if s.Kind == latency.SkipUnknown || s.Kind >= latency.NumSkipKinds {
		return s.Name
	}
	return skipKeys[s.Kind]
}

// NewSkip is n of the kind key names: SkipUnknown, with key as its name,
// when this version does not know it (a newer writer's).
func NewSkip(key string, n uint64) latency.Skip {
	for k, name := range skipKeys {
		if name != "" && name == key {
			return latency.Skip{Kind: latency.SkipKind(k), N: n}
		}
	}
	return latency.Skip{Kind: latency.SkipUnknown, N: n, Name: key}
}
