package record

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/numatrace/numatrace/internal/stall"
)

// The kernel snapshots in the shipped recordings decode into today's
// types and encode back to the very same bytes: a field renamed, added
// or retagged would change the file format, and fails here first.
func TestSnapshotsKeepTheirFormat(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/recordings/*.ntr")
	if len(files) == 0 {
		t.Fatal("no shipped recordings")
	}
	snapshots, threads, hists := 0, 0, 0
	for _, f := range files {
		r, err := Open(f)
		if err != nil {
			t.Fatal(err)
		}
		eachRecord(t, r, func(_ *blockDecoder, typ byte, body []byte) {
			if typ != recSnapshot {
				return
			}
			s, err := snapshotFromJSON(body)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			// The hand decoder takes what numatrace wrote, and reads what
			// encoding/json reads.
			if fast, ok := readSnapshot(body); !ok || !reflect.DeepEqual(fast, s) {
				t.Fatalf("%s: the hand decoder (took it: %v) reads a snapshot otherwise than encoding/json", f, ok)
			}
			again, err := recordJSON(recSnapshot, *s)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, body) {
				t.Fatalf("%s: a snapshot does not encode back to its bytes:\nfile:  %.300s\nagain: %.300s", f, body, again)
			}
			snapshots++
			threads += len(s.Data.Threads)
			for _, th := range s.Data.Threads {
				for c, h := range th.Hists {
					if c >= stall.NumCauses || h.Count == 0 && h.TotalNs > 0 {
						t.Errorf("%s: tid %d has a histogram of cause %d: %+v", f, th.TID, c, h)
					}
					hists++
				}
			}
		})
		r.Close()
	}
	if snapshots == 0 || threads == 0 || hists == 0 {
		t.Fatalf("%d snapshots, %d threads, %d histograms: the check saw nothing", snapshots, threads, hists)
	}
}
