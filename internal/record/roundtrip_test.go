package record

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// Every header and JSON record of the shipped recordings decodes through
// the reader's path and encodes back, through the writer's, to the very
// bytes in the file: whatever the types behind them become, the format
// stays as it is.
func TestEveryRecordEncodesBackToItsBytes(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/recordings/*.ntr")
	if len(files) == 0 {
		t.Fatal("no shipped recordings")
	}
	seen := map[byte]int{}
	for _, f := range files {
		checkHeaderBytes(t, f)
		r, err := Open(f)
		if err != nil {
			t.Fatal(err)
		}
		eachRecord(t, r, func(cur *blockDecoder, typ byte, body []byte) {
			v := jsonItem(t, cur, typ, body)
			if v == nil {
				return
			}
			again, err := recordJSON(typ, v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, body) {
				t.Fatalf("%s: record type %d does not encode back to its bytes:\nfile:  %.400s\nagain: %.400s", f, typ, body, again)
			}
			seen[typ]++
		})
		r.Close()
	}
	t.Logf("records checked by type: %v", seen)
	for _, typ := range []byte{recSnapshot, recProcfs, recLatency, recEnd} {
		if seen[typ] == 0 {
			t.Errorf("no record of type %d in the shipped recordings: the check saw nothing of it", typ)
		}
	}
}

// jsonItem decodes a JSON record as the reader does and returns what the
// writer was given for it; nil for a record that is not JSON.
func jsonItem(t *testing.T, d *blockDecoder, typ byte, body []byte) any {
	switch typ {
	case recSnapshot, recProcfs, recLatency, recEnd:
	default:
		return nil
	}
	var it Item
	if _, err := d.decode(typ, body, &it); err != nil {
		t.Fatal(err)
	}
	switch typ {
	case recSnapshot:
		return *it.Snapshot
	case recProcfs:
		return *it.Procfs
	case recLatency:
		return *it.Latency
	}
	return *it.End
}

func checkHeaderBytes(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint32(b[12:])
	file := b[16 : 16+n]
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	again, err := headerJSON(r.Header())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, file) {
		t.Fatalf("%s: the header does not encode back to its bytes:\nfile:  %.600s\nagain: %.600s", path, file, again)
	}
}
