package perfetto

import (
	"github.com/numatrace/numatrace/internal/output"
	"github.com/numatrace/numatrace/internal/stall"
)

// stallArgs are a stall's details, shown when its slice is selected: the
// NDJSON stall line's details, without what the track already says (time,
// duration, pid, tid, comm, cause).
func stallArgs(ev *stall.Event) output.Details { return output.DetailsOf(ev) }
