package source

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// pgbenchReader reads pgbench's -l per-transaction log, as the pgbench
// manual lists its fields:
//
//	client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]
//
// time is the latency in µs; the transaction ended at time_epoch seconds
// and time_us µs. A transaction pgbench skipped (--latency-limit) or that
// failed says so in place of its time: it has no latency.
func pgbenchReader(o LogFormat) (LineReader, error) {
	if o.Field != "" || o.Unit != "" {
		return nil, errors.New("pgbench's log has its own fields and units: no --latency-field or --latency-unit")
	}
	return readPgbench, nil
}

func readPgbench(line string) (uint64, uint64, error) {
	f := strings.Fields(line)
	if len(f) < 6 || len(f) > 8 {
		return 0, 0, fmt.Errorf("want pgbench's 6 to 8 fields (client_id transaction_no time script_no time_epoch time_us ...), got %d", len(f))
	}
	for i, s := range f {
		if i != 2 && !digits(s) {
			return 0, 0, fmt.Errorf("pgbench's field %d is %q, not a number", i+1, s)
		}
	}
	sec, err1 := strconv.ParseUint(f[4], 10, 64)
	us, err2 := strconv.ParseUint(f[5], 10, 64)
	// An epoch from 2001 on and a fraction under a second: not the
	// --aggregate-interval log, whose fields are sums.
	if err1 != nil || err2 != nil || sec < 1e9 || sec > 1e11 || us >= 1e6 {
		return 0, 0, fmt.Errorf("pgbench's time_epoch %q and time_us %q are not a time", f[4], f[5])
	}
	ts := sec*1e9 + us*1e3
	if !digits(f[2]) {
		switch f[2] {
		case "skipped", "failed", "serialization", "deadlock":
			return ts, 0, &noLatency{"a transaction pgbench logged as " + f[2]}
		}
		return 0, 0, fmt.Errorf("pgbench's time is %q, not a number", f[2])
	}
	lat, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil || lat > 1<<63/1000 {
		return 0, 0, fmt.Errorf("pgbench's time %q is out of range", f[2])
	}
	return ts, lat * 1e3, nil
}
