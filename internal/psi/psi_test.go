package psi

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          Totals
		wantErr       string // a part of the one error; "" for none
	}{
		{name: "system", content: pressure("12345", "678"),
			want: Totals{Some: 12345 * time.Microsecond, Full: 678 * time.Microsecond}},
		{name: "full first, blank lines", content: "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=2\n",
			want: Totals{Some: 2 * time.Microsecond, Full: 1 * time.Microsecond}},
		{name: "zero", content: pressure("0", "0"), want: Totals{}},
		{name: "no full line", content: "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n",
			wantErr: `want a "some" and a "full" line, got some=true full=false`},
		{name: "empty", content: "", wantErr: "got some=false full=false"},
		{name: "two some lines", content: pressure("1", "1") + "some avg10=0.00 avg60=0.00 avg300=0.00 total=9\n",
			wantErr: `line 3: a second "some" line`},
		{name: "negative total", content: pressure("-1", "0"), wantErr: `line 1: bad total (microseconds): "total=-1"`},
		{name: "total not a number", content: pressure("12x", "0"), wantErr: `line 1: bad total (microseconds): "total=12x"`},
		{name: "total overflows a Duration", content: pressure("9223372036854776", "0"), wantErr: "line 1: bad total"},
		{name: "unknown kind", content: "most avg10=0.00 avg60=0.00 avg300=0.00 total=1\n",
			wantErr: `line 1: want "some|full avg10=.. avg60=.. avg300=.. total=..", got "most avg10`},
		{name: "missing field", content: "some avg10=0.00 avg60=0.00 total=1\n", wantErr: "line 1: want"},
		{name: "fields out of order", content: "some total=1 avg10=0.00 avg60=0.00 avg300=0.00\n", wantErr: "line 1: want"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, dir := fakeRoot(t, map[string]string{"proc/pressure/memory": tc.content})
			got, err := Read(root, System())
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("Read = %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Read = %+v, want an error with %q", got, tc.wantErr)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.wantErr) || strings.Count(msg, dir+"/proc/pressure/memory") != 1 {
				t.Errorf("error %q: want it to name %s/proc/pressure/memory once and hold %q", msg, dir, tc.wantErr)
			}
			if errors.Is(err, ErrNotAvailable) || got != (Totals{}) {
				t.Errorf("a malformed file is an error, not PSI missing, and gives no totals: %v, %+v", err, got)
			}
		})
	}
}

func TestReadNotAvailable(t *testing.T) {
	cg := Scope{Name: "/app", File: "sys/fs/cgroup/app/memory.pressure"}
	for _, tc := range []struct {
		name   string
		files  map[string]string
		scope  Scope
		reason string
	}{
		{"no /proc/pressure", map[string]string{"proc/": ""}, System(), "built without CONFIG_PSI or booted with psi=0"},
		{"cgroup gone", map[string]string{"sys/fs/cgroup/": ""}, cg, "the cgroup no longer exists"},
		{"cgroup.pressure 0", map[string]string{"sys/fs/cgroup/app/cgroup.pressure": "0\n"}, cg,
			"PSI is switched off for this cgroup (its cgroup.pressure is 0)"},
		{"cgroup without pressure files", map[string]string{"sys/fs/cgroup/app/cgroup.procs": ""}, cg,
			"built without CONFIG_PSI or booted with psi=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, dir := fakeRoot(t, tc.files)
			got, err := Read(root, tc.scope)
			var na *NotAvailableError
			if !errors.As(err, &na) || !errors.Is(err, ErrNotAvailable) || !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Read = %+v, %v; want a NotAvailableError over ErrNotExist", got, err)
			}
			if na.Scope != tc.scope.Name || na.Path != dir+"/"+tc.scope.File || !strings.Contains(na.Reason, tc.reason) {
				t.Errorf("got %+v; want scope %s, path %s/%s, a reason with %q", na, tc.scope.Name, dir, tc.scope.File, tc.reason)
			}
			if !strings.HasPrefix(err.Error(), "memory PSI not available for "+tc.scope.Name+": "+dir+"/") {
				t.Errorf("message %q", err)
			}
		})
	}
}

// psi=0 can make the kernel refuse the read with EOPNOTSUPP rather than
// hide the file; hostfs passes the errno on inside a PathError.
func TestEOPNOTSUPPIsNotAvailable(t *testing.T) {
	root, _ := fakeRoot(t, map[string]string{"proc/pressure/memory": pressure("1", "1")})
	err := &fs.PathError{Op: "read", Path: "/proc/pressure/memory", Err: syscall.EOPNOTSUPP}
	if why := unavailable(root, System(), err); !strings.Contains(why, "EOPNOTSUPP") || !strings.Contains(why, "psi=0") {
		t.Errorf("EOPNOTSUPP: reason %q", why)
	}
	if why := unavailable(root, System(), &fs.PathError{Op: "open", Err: syscall.EACCES}); why != "" {
		t.Errorf("EACCES is an error of its own, not PSI missing: reason %q", why)
	}
}

// This machine's /proc/pressure/memory, read twice: it parses, full never
// exceeds some, and neither goes back.
func TestReadLive(t *testing.T) {
	root := liveRoot(t)
	a, err := Read(root, System())
	testutil.RequireFeature(t, !errors.Is(err, ErrNotAvailable), "no memory PSI on this kernel")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Read(root, System())
	if err != nil {
		t.Fatal(err)
	}
	if a.Full > a.Some || b.Some < a.Some || b.Full < a.Full {
		t.Errorf("totals %+v then %+v: want full <= some, neither going back", a, b)
	}
}
