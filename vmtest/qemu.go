package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Line is one NT line the guest printed: its kind and JSON body.
type Line struct {
	Kind string
	Body json.RawMessage
}

// Boot runs kernel k's guest with two 1 GiB NUMA nodes, one CPU each,
// under software emulation (KVM hangs at boot on these machines), and
// returns the NT lines and the whole console log. It fails if the guest
// does not finish (NTDONE) within limit.
func Boot(ctx context.Context, k Kernel, vmlinuz, initrd string, scenarios []string, limit time.Duration, extraArgs ...string) ([]Line, string, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	accel := "tcg"
	if k.SingleThreadTCG {
		accel = "tcg,thread=single"
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64",
		"-accel", accel, "-cpu", "max", "-m", "2048", "-smp", "2",
		"-object", "memory-backend-ram,id=m0,size=1024M", "-object", "memory-backend-ram,id=m1,size=1024M",
		"-numa", "node,nodeid=0,cpus=0,memdev=m0", "-numa", "node,nodeid=1,cpus=1,memdev=m1",
		"-kernel", vmlinuz, "-initrd", initrd,
		"-append", strings.Join(append([]string{"console=ttyS0 panic=-1 quiet loglevel=3 nt.scenarios=" + strings.Join(scenarios, ",")}, extraArgs...), " "),
		"-nographic", "-no-reboot", "-monitor", "none", "-serial", "stdio")
	var console bytes.Buffer
	cmd.Stdout, cmd.Stderr = &console, &console
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
		return lines, log, fmt.Errorf("guest did not finish within %s", limit)
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
