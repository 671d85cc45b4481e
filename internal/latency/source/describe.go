package source

import (
	"fmt"

	"github.com/numatrace/numatrace/internal/inbound"
	"github.com/numatrace/numatrace/internal/prose"
	rundesc "github.com/numatrace/numatrace/internal/run" // not run: a test helper of this package has the name
)

// serverSide is what timing requests on the server's own sockets leaves
// out of them, as the client would see them (the startup notice says it
// too).
const serverSide = "server-side: excludes the network and the client's own queues, but a paced connection's requests held up by a frozen one count from when they were due"

// Describe says which source c names, for the run's description: the
// report and the view show it, the recording keeps it. The kernel source
// is described once FindInbound found its endpoints; before, or with
// none, it is no source.
func (c Config) Describe() rundesc.LatencySource {
	switch {
	case c.File != "":
		return rundesc.LatencySource{Kind: rundesc.LatencyFile, Detail: c.fileDetail()}
	case c.PromURL != "":
		return rundesc.LatencySource{Kind: rundesc.LatencyProm, Detail: c.PromMetric + " at " + c.PromURL}
	case c.Uprobe != "":
		return rundesc.LatencySource{Kind: rundesc.LatencyUprobe, Detail: "calls of " + c.Uprobe + ", timed in the kernel"}
	case c.Mode == ModeKernel && c.inbound != nil:
		return rundesc.LatencySource{Kind: rundesc.LatencyKernel, Detail: socketsDetail(*c.inbound)}
	}
	return rundesc.LatencySource{}
}

// fileDetail is the file, and the format, field and unit when named.
func (c Config) fileDetail() string {
	d := c.File
	if c.File == "-" {
		d = "stdin"
	}
	f := c.FileFormat
	for _, lf := range logFormats {
		if lf.name == f.Name && lf.about != "" {
			d += ", " + lf.about
		}
	}
	if f.Field != "" {
		d += ", field " + f.Field
	}
	if f.Unit != "" {
		d += " in " + f.Unit
	}
	return d
}

// socketsDetail is "requests on sockets of 0.0.0.0:6379, [::]:6379
// (12 connections at start); server-side: ...".
func socketsDetail(ep inbound.Endpoints) string {
	return fmt.Sprintf("requests on sockets of %s (%s at start); %s",
		ep.Addrs(), prose.Count(uint64(ep.Conns), "connection"), serverSide)
}
