package source

import (
	"net/netip"
	"testing"

	"github.com/numatrace/numatrace/internal/inbound"
	rundesc "github.com/numatrace/numatrace/internal/run"
)

// Each source says what it is, for the run's description; the kernel
// source only once its endpoints are found, and no source says nothing.
func TestConfigDescribesItsSource(t *testing.T) {
	ep := inbound.Endpoints{Listeners: []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:6379"), netip.MustParseAddrPort("[::]:6379")}, Conns: 12}
	for _, tc := range []struct {
		c    Config
		want rundesc.LatencySource
	}{
		{Config{File: "/var/log/nginx/access.log", FileFormat: LogFormat{Name: "nginx", Field: "rt"}},
			rundesc.LatencySource{Kind: rundesc.LatencyFile, Detail: "/var/log/nginx/access.log, an nginx access log, field rt"}},
		{Config{File: "-", FileFormat: LogFormat{Name: "auto"}}, rundesc.LatencySource{Kind: rundesc.LatencyFile, Detail: "stdin"}},
		{Config{File: "app.log", FileFormat: LogFormat{Name: "json", Field: "took", Unit: "ms"}},
			rundesc.LatencySource{Kind: rundesc.LatencyFile, Detail: "app.log, JSON lines, field took in ms"}},
		{Config{PromURL: "http://host:9100/metrics", PromMetric: "redis_latency_seconds"},
			rundesc.LatencySource{Kind: rundesc.LatencyProm, Detail: "redis_latency_seconds at http://host:9100/metrics"}},
		{Config{Uprobe: "/usr/bin/x:handle"}, rundesc.LatencySource{Kind: rundesc.LatencyUprobe, Detail: "calls of /usr/bin/x:handle, timed in the kernel"}},
		{Config{Mode: ModeKernel, inbound: &ep}, rundesc.LatencySource{Kind: rundesc.LatencyKernel,
			Detail: "requests on sockets of 0.0.0.0:6379, [::]:6379 (12 connections at start); server-side: excludes the network and the client's own queues, but a paced connection's requests held up by a frozen one count from when they were due"}},
		{Config{Mode: ModeKernel}, rundesc.LatencySource{}}, // FindInbound found none: off
		{Config{Mode: ModeOff}, rundesc.LatencySource{}},
		{Config{}, rundesc.LatencySource{}},
	} {
		if got := tc.c.Describe(); got != tc.want {
			t.Errorf("%+v describes\n %+v, want\n %+v", tc.c, got, tc.want)
		}
	}
}
