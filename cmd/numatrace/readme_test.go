package main

// The README is where a newcomer starts: its first section is what to do
// during an incident, and its commands must work as written.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeSection is the text of README section title (a "## " heading)
// up to the next one, and the titles of all its sections in order.
func readmeSection(t *testing.T, title string) (string, []string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	body, in := "", false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "## ") {
			titles = append(titles, strings.TrimPrefix(l, "## "))
			in = titles[len(titles)-1] == title
			continue
		}
		if in {
			body += l + "\n"
		}
	}
	return body, titles
}

// codeBlocks are the fenced blocks of lang in text, each as its lines.
func codeBlocks(text, lang string) [][]string {
	var out [][]string
	for _, part := range strings.Split(text, "```"+lang+"\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		out = append(out, strings.Split(strings.TrimRight(block, "\n"), "\n"))
	}
	return out
}

// commands are a shell block's commands, their comments cut.
func commands(lines []string) []string {
	var out []string
	for _, l := range lines {
		l, _, _ = strings.Cut(l, "#")
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// The first section is the incident runbook: attach, doctor, then the
// recording read back, each accepted as written (a PID that does not
// exist and a recording not yet made are the only errors), followed by
// output pasted from a real run that opens on its verdict.
func TestREADMEOpensWithTheIncidentRunbook(t *testing.T) {
	const runbook = "During an incident"
	body, titles := readmeSection(t, runbook)
	if len(titles) == 0 || titles[0] != runbook {
		t.Fatalf("the README's first section is %q, want %q", titles, runbook)
	}
	sh := codeBlocks(body, "sh")
	if len(sh) == 0 {
		t.Fatal("the runbook has no commands")
	}
	cmds := commands(sh[0])
	want := []string{"numatrace attach ", "numatrace doctor ", "numatrace report "}
	if len(cmds) != len(want) {
		t.Fatalf("the runbook's commands %q: want attach, doctor and report, in order", cmds)
	}
	dir := t.TempDir()
	for i, c := range cmds {
		if !strings.HasPrefix(c, want[i]) {
			t.Errorf("command %d is %q, want %s...", i+1, c, want[i])
			continue
		}
		args := strings.Fields(strings.ReplaceAll(c, "PID", "4194305"))[1:] // above any pid_max
		cmd := exec.Command(binary(t), args...)
		cmd.Dir = dir
		code, stderr := runForError(cmd)
		if code != 2 || strings.Contains(stderr, "\n") ||
			!(strings.Contains(stderr, "pid 4194305") || strings.Contains(stderr, "open recording")) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 for the missing process or recording alone", c, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "incident.ntr")); err == nil {
		t.Error("an attach to a missing process left a recording")
	}
	var sample []string
	for _, b := range codeBlocks(body, "text") {
		if strings.HasPrefix(b[0], "$ numatrace attach -p ") {
			sample = b
		}
	}
	if sample == nil {
		t.Fatal("the runbook shows no output of attach")
	}
	out := strings.Join(sample, "\n")
	for _, s := range []string{"\nVERDICT: ", "\nWORST:   tid ", "\nNEXT:    ", "\nTHREADS (", "\nLATENCY ("} {
		if !strings.Contains(out, s) {
			t.Errorf("the sample of attach's output lacks %q", strings.TrimSpace(s))
		}
	}
}
