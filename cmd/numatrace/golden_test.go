package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden outputs in testdata/golden/")

// goldenCommands are the outputs a recording gives, each kept byte for
// byte: the formats users and scripts read. A change to any of them is
// either a fix, made in a commit of its own with `-update`, or a defect.
var goldenCommands = []struct {
	name string
	args []string
}{
	{"report.txt", []string{"report"}},
	{"report.json", []string{"report", "--json"}},
	{"replay.ndjson", []string{"replay", "--json", "--fast"}},
	{"perfetto.json", []string{"export", "--format", "perfetto", "-o", "-"}},
}

// Every shipped recording through every output format, against the
// golden copy: stdout, stderr and the exit status.
func TestOutputsOfTheShippedRecordingsAreUnchanged(t *testing.T) {
	bin := binary(t)
	recs, err := filepath.Glob(filepath.Join("..", "..", "testdata", "recordings", "*.ntr"))
	if err != nil || len(recs) == 0 {
		t.Fatalf("no shipped recordings (%v)", err)
	}
	for _, rec := range recs {
		name := strings.TrimSuffix(filepath.Base(rec), ".ntr")
		for _, c := range goldenCommands {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				cmd := exec.Command(bin, append(c.args, rec)...)
				// The report prints local wall-clock times; nothing else
				// of the environment may reach the outputs.
				cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TZ=UTC", "LANG=C"}
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				status := 0
				if err := cmd.Run(); err != nil {
					var exit *exec.ExitError
					if !errors.As(err, &exit) {
						t.Fatal(err)
					}
					status = exit.ExitCode()
				}
				got := goldenOutput(stdout.Bytes(), stderr.Bytes(), status)
				path := filepath.Join("testdata", "golden", name, c.name+".gz")
				if *updateGolden {
					writeGolden(t, path, got)
					return
				}
				want, err := readGolden(path)
				if err != nil {
					t.Fatalf("%v (run with -update to write it)", err)
				}
				if diff := firstDifference(want, got); diff != "" {
					t.Errorf("numatrace %s %s differs from %s: %s", strings.Join(c.args, " "), filepath.Base(rec), path, diff)
				}
			})
		}
	}
}

// goldenOutput puts a run's three results in one text: stdout whole,
// then stderr and the status after a separator line stdout never has.
func goldenOutput(stdout, stderr []byte, status int) []byte {
	var b bytes.Buffer
	b.Write(stdout)
	fmt.Fprintf(&b, "\n\x00--- stderr ---\n%s\x00--- exit status %d ---\n", stderr, status)
	return b.Bytes()
}

func readGolden(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(z)
}

// writeGolden writes b gzipped, with no name or time in the gzip header,
// so the same output always gives the same file.
func writeGolden(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	z, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	z.Write(b)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// firstDifference says where two outputs first differ, by line, with
// both lines cut to a readable length; "" when they are equal.
func firstDifference(want, got []byte) string {
	if bytes.Equal(want, got) {
		return ""
	}
	wl, gl := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g []byte
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if !bytes.Equal(w, g) {
			return fmt.Sprintf("line %d (of %d, golden %d):\n  golden: %.300q\n  now:    %.300q", i+1, len(gl), len(wl), w, g)
		}
	}
	return "they differ" // not reached: equal lines make equal texts
}
