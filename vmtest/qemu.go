package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Line is one NT line the guest printed: its kind and JSON body.
type Line struct {
	Kind string
	Body json.RawMessage
}

// Guest is one boot of a two-node guest.
type Guest struct {
	Kernel          Kernel
	Vmlinuz, Initrd string
	Scenarios       []string
	Limit           time.Duration // the guest must print NTDONE within it
	Args            []string      // more kernel command-line arguments
	// Accel is QEMU's accelerator: "" takes the kernel's (Kernel.Accel).
	Accel string
	// NodeMiB is each node's memory: 1024 if 0.
	NodeMiB int
	// Console, if set, also gets the console as the guest prints it.
	Console io.Writer
}

// Boot runs the guest with two NUMA nodes, one CPU each, under software
// emulation (KVM hangs at boot on these machines), and returns the NT
// lines and the whole console log. It fails if the guest does not finish
// (NTDONE) within g.Limit.
func (g Guest) Boot(ctx context.Context) ([]Line, string, error) {
	ctx, cancel := context.WithTimeout(ctx, g.Limit)
	defer cancel()
	accel := g.Accel
	if accel == "" {
		accel = g.Kernel.Accel()
	}
	node := g.NodeMiB
	if node == 0 {
		node = 1024
	}
	args := append([]string{"console=ttyS0 panic=-1 quiet loglevel=3 nt.scenarios=" + strings.Join(g.Scenarios, ",")}, g.Args...)
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64",
		"-accel", accel, "-cpu", "max", "-m", fmt.Sprint(2*node), "-smp", "2",
		"-object", fmt.Sprintf("memory-backend-ram,id=m0,size=%dM", node),
		"-object", fmt.Sprintf("memory-backend-ram,id=m1,size=%dM", node),
		"-numa", "node,nodeid=0,cpus=0,memdev=m0", "-numa", "node,nodeid=1,cpus=1,memdev=m1",
		"-kernel", g.Vmlinuz, "-initrd", g.Initrd,
		"-append", strings.Join(args, " "),
		"-nographic", "-no-reboot", "-monitor", "none", "-serial", "stdio")
	var console bytes.Buffer
	var w io.Writer = &console
	if g.Console != nil {
		w = io.MultiWriter(&console, g.Console)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	log := console.String()
	lines := parseLines(log)
	done := false
	for _, l := range lines {
		if l.Kind == "NTDONE" {
			done = true
		}
	}
	if ctx.Err() != nil {
		return lines, log, fmt.Errorf("guest did not finish within %s", g.Limit)
	}
	if err != nil {
		return lines, log, fmt.Errorf("qemu: %w", err)
	}
	if !done {
		return lines, log, fmt.Errorf("guest stopped before it finished")
	}
	return lines, log, nil
}

func parseLines(log string) []Line {
	var out []Line
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		text := strings.TrimRight(sc.Text(), "\r")
		kind, body, ok := strings.Cut(text, " ")
		if !ok || !strings.HasPrefix(kind, "NT") || !json.Valid([]byte(body)) {
			continue
		}
		out = append(out, Line{Kind: kind, Body: json.RawMessage(body)})
	}
	return out
}
