package source

import (
	"net"
	"os"
	"strings"
	"testing"
)

func TestLatencyModeFlags(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // in the error; "" for none
	}{
		{Config{Mode: ModeKernel}, ""},
		{Config{Mode: ModeKernel, Port: 6379}, ""},
		{Config{Mode: ModeOff}, ""},
		{Config{Mode: "sockets"}, `--latency wants kernel or off, got "sockets"`},
		{Config{Mode: ModeKernel, Uprobe: "/bin/true:main"}, "pick one latency source"},
		{Config{Mode: ModeOff, File: "-"}, "pick one latency source"},
		{Config{Port: 6379}, "--latency-port is a TCP port (1-65535) timed with --latency kernel"},
		{Config{Mode: ModeKernel, Port: 70000}, "--latency-port is a TCP port"},
	} {
		err := tc.cfg.Check()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// The kernel source is the default only when nothing else is named and
// --latency does not turn it off.
func TestDefaultKernel(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, ModeKernel},
		{Config{Mode: ModeOff}, ModeOff},
		{Config{File: "-"}, ModeAuto},
		{Config{PromURL: "http://x", PromMetric: "m"}, ModeAuto},
	} {
		c := tc.cfg
		c.DefaultKernel()
		if c.Mode != tc.want {
			t.Errorf("%+v: mode %q, want %q", tc.cfg, c.Mode, tc.want)
		}
	}
}

// Without the target's sockets found, the source does not open.
func TestKernelSourceNeedsItsEndpoints(t *testing.T) {
	if _, err := (Config{Mode: ModeKernel}).Open(Env{}); err == nil {
		t.Fatal("opened with no endpoints and no tracer")
	}
}

// FindInbound times this process's listener, and turns the source off
// with one notice for a port it does not listen on.
func TestFindInbound(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := Config{Mode: ModeKernel}
	var said []string
	if err := c.FindInbound(os.Getpid(), func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeKernel || c.inbound == nil || c.inbound.Listeners[0].String() != l.Addr().String() || said != nil {
		t.Fatalf("mode %q, endpoints %v, said %q", c.Mode, c.inbound, said)
	}
	c = Config{Mode: ModeKernel, Port: 1}
	if err := c.FindInbound(os.Getpid(), func(s string) { said = append(said, s) }); err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeOff || len(said) != 1 || !strings.Contains(said[0], "no listener on port 1") {
		t.Fatalf("mode %q, said %q", c.Mode, said)
	}
}
