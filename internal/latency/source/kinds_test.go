package source

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"flag"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/inbound"
	rundesc "github.com/numatrace/numatrace/internal/run"
)

// kindArgs are, for each kind of latency source, flags that name it and
// pass Check. A new kind needs its entry here.
func kindArgs(t *testing.T) map[rundesc.LatencyKind][]string {
	log := filepath.Join(t.TempDir(), "requests.log")
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return map[rundesc.LatencyKind][]string{
		rundesc.LatencyFile:   {"--latency-file", log},
		rundesc.LatencyProm:   {"--latency-prom", "http://127.0.0.1:9100/metrics", "--latency-metric", "request_seconds"},
		rundesc.LatencyUprobe: {"--latency-uprobe", tinyELF(t) + ":handle"},
		rundesc.LatencyKernel: {"--latency", "kernel"},
	}
}

// Every kind of latency source (run.LatencyKinds) is wired at each place
// a source is: its entry in kinds (the flag that names it), its flag in
// AddFlags, Set, Check (on its own it passes; with another it is one
// too many), Describe and Open. A kind forgotten at one of them fails
// here, by name.
func TestEveryLatencyKindIsWired(t *testing.T) {
	args := kindArgs(t)
	for _, k := range rundesc.LatencyKinds() {
		a, ok := args[k]
		if !ok {
			t.Errorf("%s: no flags in kindArgs (kinds_test.go) to name it", k)
			continue
		}
		if f := Flag(k); f == "" || !strings.HasPrefix(strings.Join(a, " "), f) {
			t.Errorf("%s: its entry in kinds (source.go) names the flag %q, want the one that names it (%s)", k, f, a[0])
		}
		c, err := parseSourceFlags(a)
		if err != nil {
			t.Errorf("%s: %v (AddFlags)", k, err)
			continue
		}
		if !c.Set() {
			t.Errorf("%s: Set says no source is named: no entry in kinds (source.go)?", k)
		}
		if err := c.Check(); err != nil {
			t.Errorf("%s: Check: %v", k, err)
		}
		for other, b := range args {
			if other == k {
				continue
			}
			two, err := parseSourceFlags(append(append([]string(nil), a...), b...))
			if err == nil {
				err = two.Check()
			}
			if err == nil || !strings.Contains(err.Error(), "pick one latency source") {
				t.Errorf("%s with %s: %v, want pick one latency source (kinds, source.go)", k, other, err)
			}
		}
		if k == rundesc.LatencyKernel { // what FindInbound finds, before the run is described
			c.inbound = &inbound.Endpoints{Listeners: []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:6379")}}
		}
		if got := c.Describe().Kind; got != k {
			t.Errorf("%s: Describe says %q (describe.go)", k, got)
		}
		src, err := c.Open(Env{Start: time.Now(), StartNs: 1, Window: time.Second, Timers: fakeTimers{}, Sockets: fakeTimers{}})
		if err != nil || src == nil {
			t.Errorf("%s: Open gives %v, %v (source.go)", k, src, err)
			continue
		}
		src.Close()
	}
}

// parseSourceFlags is the Config args name.
func parseSourceFlags(args []string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.AddFlags(fs)
	err := fs.Parse(args)
	return c, err
}

// fakeTimers attaches timers that time nothing.
type fakeTimers struct{}

func (fakeTimers) TimeRequests(binary, symbol string, pid int) (RequestTimer, error) {
	return &burstTimer{closed: make(chan struct{})}, nil
}

func (fakeTimers) TimeSockets(ports []uint16) (RequestTimer, error) {
	return &burstTimer{closed: make(chan struct{})}, nil
}

// tinyELF is an ELF executable that is a header only: what
// --latency-uprobe's check opens, on any OS.
func tinyELF(t *testing.T) string {
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT), Ehsize: 64}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var b bytes.Buffer
	if err := binary.Write(&b, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(path, b.Bytes(), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}
