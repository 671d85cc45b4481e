package perfetto

import (
	"encoding/json"
	"strconv"

	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/stall"
)

// stallArgs are a stall's details, shown when its slice is selected: the
// NDJSON stall line's details, without what the track already says (time,
// duration, pid, tid, comm, cause).
func stallArgs(ev *stall.Event) output.Details { return output.DetailsOf(ev) }

// beforeStartArgs are the details of an event that began before the
// recording's start: Perfetto places anything before 0 ahead of the
// trace, so the event is drawn from 0, and its details keep what was cut
// (before_start_ns) and, for a stall, its whole duration (dur_ns).
type beforeStartArgs struct {
	details  any    // the event's own details, a JSON object
	beforeNs uint64 // how long before the start it began
	durNs    uint64 // a stall's whole duration; 0 for an instant
}

func (a beforeStartArgs) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(a.details)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' { // no details (null)
		b = []byte("{}")
	}
	b = b[:len(b)-1] // the closing brace
	if len(b) > 1 {
		b = append(b, ',')
	}
	b = append(b, `"before_start_ns":`...)
	b = strconv.AppendUint(b, a.beforeNs, 10)
	if a.durNs > 0 {
		b = append(b, `,"dur_ns":`...)
		b = strconv.AppendUint(b, a.durNs, 10)
	}
	return append(b, '}'), nil
}
