package tui

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/record"
	"github.com/numatrace/numatrace/internal/replay"
)

// A replay's view is told the run as the engine is: the recording's
// whole description (thresholds and spike settings too), not the few
// fields the header line shows, rebuilt.
func TestReplayIsToldTheRecordingsRun(t *testing.T) {
	for _, name := range []string{"redis-memcg-hog.ntr", "vm-6.1-misplaced.ntr"} {
		r, err := record.Open(recordings + name)
		if err != nil {
			t.Fatal(err)
		}
		h := r.Header()
		r.Close()
		p := loadPlayer(t, name)
		if got := p.Store().Frame().Info.Run; !reflect.DeepEqual(got, h.Run()) {
			t.Errorf("%s: the view is told\n%+v\nthe recording says\n%+v", name, got, h.Run())
		}
		if got := p.Store().Frame().Info.Machine; !reflect.DeepEqual(got, NewMachine(h.Host.CPUNode, h.Host.NodeMem)) {
			t.Errorf("%s: the view's machine %+v", name, got)
		}
	}
}

// The view takes the run's description and doctor's report as they
// are. It reads no recording's header and decodes no JSON: a replay
// converts the header at its edge, LoadRecording, once.
func TestTheViewIsToldTheRunNotAHeader(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if imp.Path.Value == `"encoding/json"` {
				t.Errorf("%s imports encoding/json: the view is told doctor's report, not its JSON", e.Name())
			}
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name == "LoadRecording" {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Header" {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "record" {
						t.Errorf("%s: %s takes a record.Header: the view is told a run.Description", e.Name(), fn.Name.Name)
					}
				}
				return true
			})
		}
	}
}

// The report quitting a replay's view prints is the recording's, as
// `numatrace report` prints it, whichever window the view was at.
func TestPlayersReportIsTheRecordings(t *testing.T) {
	for _, name := range []string{"redis-memcg-hog.ntr", "vm-6.1-thp.ntr"} {
		r, err := record.Open(recordings + name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := replay.Run(context.Background(), r, replay.Options{TopThreads: 20})
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		p := loadPlayer(t, name)
		p.Seek(3)
		var got, wantText bytes.Buffer
		p.Report().Text(&got)
		want.Text(&wantText)
		if got.String() != wantText.String() {
			t.Errorf("%s: the player's report\n%s\n`numatrace report`'s\n%s", name, got.String(), wantText.String())
		}
	}
}
