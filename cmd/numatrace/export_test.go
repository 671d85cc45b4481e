package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A format in exportFormats is one entry; what cannot come from the
// table names it too, and this fails for a site left out: the usage, the
// README's examples and docs/FORMAT.md's account of what each export
// reads (docs/ARCHITECTURE.md, "Recipe: a new export format").
func TestEveryExportFormatIsInEveryPlace(t *testing.T) {
	docs := map[string]string{}
	for _, f := range []string{"../../README.md", "../../docs/FORMAT.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[filepath.Base(f)] = strings.Join(strings.Fields(string(b)), " ")
	}
	if want := "numatrace export --format " + strings.Join(exportFormatNames(), "|") + " FILE"; !strings.Contains(usage, want) {
		t.Errorf("the usage has no line %q", want)
	}
	_, _, unknown := runCLI("export", "--format", "none-such", "x.ntr")
	rec := filepath.Join("..", "..", "testdata", "recordings", "redis-memcg-hog.ntr")
	for _, f := range exportFormats {
		if f.name == "" || f.about == "" || f.write == nil {
			t.Errorf("%q: a format needs a name, words for its help and a writer", f.name)
			continue
		}
		for doc, text := range docs {
			if !strings.Contains(text, "--format "+f.name) {
				t.Errorf("%s does not name --format %s", doc, f.name)
			}
		}
		if _, help, _ := runCLI("help", "export"); !strings.Contains(strings.Join(strings.Fields(help), " "), f.name+" ("+f.about+")") {
			t.Errorf("export's help does not say what %s is:\n%s", f.name, help)
		}
		if !strings.Contains(unknown, f.name) {
			t.Errorf("an unknown format's error does not offer %s: %q", f.name, unknown)
		}
		out := filepath.Join(t.TempDir(), "out")
		if code, _, stderr := runCLI("export", "--format", f.name, "-o", out, rec); code != 0 || stderr != "" {
			t.Errorf("export --format %s: exit %d, stderr %q", f.name, code, stderr)
		} else if st, err := os.Stat(out); err != nil || st.Size() == 0 {
			t.Errorf("export --format %s wrote nothing (%v)", f.name, err)
		}
	}
}
