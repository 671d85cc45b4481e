package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --ready-file refuses a symbolic or hard link planted at its path before
// anything is traced, as -o does: exit 2, one line, the link's target
// untouched, no recording made.
func TestReadyFileRefusesPlantedLinks(t *testing.T) {
	// serve's check is the same (internal/live's TestServeCheckRefusesALinkedReadyFile).
	for _, cmd := range [][]string{{"attach", "--no-tui", "--duration", "1s"}, {"record", "-o", "REC", "--duration", "1s"}} {
		dir := t.TempDir()
		victim, rec := filepath.Join(dir, "victim"), filepath.Join(dir, "rec.ntr")
		if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
			t.Fatal(err)
		}
		sym, hard := filepath.Join(dir, "sym"), filepath.Join(dir, "hard")
		if err := os.Symlink(victim, sym); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(victim, hard); err != nil {
			t.Fatal(err)
		}
		for path, what := range map[string]string{sym: " is a symbolic link", hard: " has 2 hard links"} {
			args := append([]string(nil), cmd...)
			for i := range args {
				if args[i] == "REC" {
					args[i] = rec
				}
			}
			code, stdout, stderr := runCLI(append(args, "--ready-file", path)...)
			msg := oneErrorLine(t, stderr)
			want := cmd[0] + ": --ready-file: " + path + what
			if code != 2 || stdout != "" || !strings.HasPrefix(msg, want) {
				t.Errorf("exit %d, %q: want exit 2 and %q...", code, msg, want)
			}
		}
		if b, _ := os.ReadFile(victim); string(b) != "precious" {
			t.Fatalf("%s: the link's target now holds %q", cmd[0], b)
		}
		if _, err := os.Stat(rec); err == nil {
			t.Errorf("%s: the recording was made before the ready file was refused", cmd[0])
		}
	}
}
