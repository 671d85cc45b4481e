package doctor

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/procfs"
)

// readPSI parses a cgroup's memory.pressure. procfs parses only
// /proc/pressure/*; the format is the same:
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
func readPSI(path string) (*procfs.PSIStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st := &procfs.PSIStats{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l procfs.PSILine
		var kind string
		if _, err := fmt.Sscanf(sc.Text(), "%s avg10=%f avg60=%f avg300=%f total=%d", &kind, &l.Avg10, &l.Avg60, &l.Avg300, &l.Total); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		switch strings.TrimSpace(kind) {
		case "some":
			st.Some = &l
		case "full":
			st.Full = &l
		}
	}
	return st, sc.Err()
}
