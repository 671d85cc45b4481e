package record

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/latency"
	"github.com/numatrace/numatrace/internal/run"
)

// everySkip is one of each kind a source skips, n = 1, 2, ..., and one
// of a kind this version does not know.
func everySkip(unknown string) []latency.Skip {
	var out []latency.Skip
	for k := latency.SkipMalformed; k < latency.NumSkipKinds; k++ {
		out = append(out, latency.Skip{Kind: k, N: uint64(k)})
	}
	return append(out, latency.Skip{Kind: latency.SkipUnknown, N: uint64(latency.NumSkipKinds), Name: unknown})
}

// endOf is the end record of the recording at path.
func endOf(t *testing.T, path string) *run.End {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		it, err := r.Next()
		if err != nil {
			t.Fatalf("no end record in %s: %v", path, err)
		}
		if it.Kind == ItemEnd {
			return it.End
		}
	}
}

// testdata/skips-1.5.ntr was written before the kinds had keys: its end
// record says each kind a source skipped in the phrase the report said
// it in ("late writes of a response"), and one the writer did not know
// ("odd things"). They are read as the kinds they name.
func TestSkipsWrittenAsPhrasesAreRead(t *testing.T) {
	end := endOf(t, filepath.Join("testdata", "skips-1.5.ntr"))
	if end.Latency == nil {
		t.Fatal("no latency account")
	}
	if want := everySkip("odd things"); !reflect.DeepEqual(end.Latency.Skipped, want) {
		t.Fatalf("skipped\n %+v\nwant\n %+v", end.Latency.Skipped, want)
	}
}

// What a source skipped is written by its kind's key, not its words for
// people, and read back whole, a newer writer's kind by its name.
func TestSkipsAreWrittenByKey(t *testing.T) {
	skips := everySkip("newer_kind")
	b, err := json.Marshal(NewEndRecord(run.End{Latency: &latency.Account{Skipped: skips}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range skips[:len(skips)-1] {
		if phrase := s.Kind.String(); strings.Contains(string(b), phrase) {
			t.Errorf("the end record says %q: %s", phrase, b)
		}
	}
	for _, key := range []string{`"kind":"late_writes"`, `"kind":"counted_from_due"`, `"kind":"newer_kind"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("the end record has no %s: %s", key, b)
		}
	}
	path := filepath.Join(t.TempDir(), "k.ntr")
	w, err := Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(run.End{Latency: &latency.Account{Skipped: skips}}); err != nil {
		t.Fatal(err)
	}
	if got := endOf(t, path).Latency.Skipped; !reflect.DeepEqual(got, skips) {
		t.Fatalf("read back\n %+v\nwant\n %+v", got, skips)
	}
}
