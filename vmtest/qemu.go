package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	// Accel is QEMU's accelerator: "" takes the package's Accel.
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
		accel = Accel
	}
	node := g.NodeMiB
	if node == 0 {
		node = 1024
	}
	args := append([]string{"console=ttyS0 panic=-1 quiet loglevel=3 nt.scenarios=" + strings.Join(g.Scenarios, ",")}, g.Args...)
	mon, err := os.MkdirTemp("", "nt-qemu")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(mon)
	monitor := filepath.Join(mon, "monitor")
	cmd := exec.Command("qemu-system-x86_64",
		"-accel", accel, "-cpu", "max", "-m", fmt.Sprint(2*node), "-smp", "2",
		"-object", fmt.Sprintf("memory-backend-ram,id=m0,size=%dM", node),
		"-object", fmt.Sprintf("memory-backend-ram,id=m1,size=%dM", node),
		"-numa", "node,nodeid=0,cpus=0,memdev=m0", "-numa", "node,nodeid=1,cpus=1,memdev=m1",
		"-kernel", g.Vmlinuz, "-initrd", g.Initrd,
		"-append", strings.Join(args, " "),
		"-nographic", "-no-reboot", "-monitor", "unix:"+monitor+",server,nowait", "-serial", "stdio")
	var console bytes.Buffer
	var w io.Writer = &console
	if g.Console != nil {
		w = io.MultiWriter(&console, g.Console)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-ctx.Done():
		// A guest that hangs so hard that its own watchdog says nothing
		// (every CPU stuck with interrupts off) can still be asked
		// where its CPUs are, from outside.
		state := vcpuState(monitor)
		cmd.Process.Kill()
		err = <-exited
		fmt.Fprintf(w, "\n== the vCPUs when the deadline passed (QEMU monitor) ==\n%s\n", state)
	}
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

// vcpuState asks QEMU's monitor for every vCPU's registers and the
// instructions at its program counter.
func vcpuState(monitor string) string {
	c, err := net.DialTimeout("unix", monitor, 3*time.Second)
	if err != nil {
		return "monitor: " + err.Error()
	}
	defer c.Close()
	io.WriteString(c, "info cpus\ninfo registers -a\ncpu 0\nx/8i $pc\ncpu 1\nx/8i $pc\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var out bytes.Buffer
	io.Copy(&out, c) // until the deadline: the monitor never closes
	// The monitor echoes each command as it would be typed, redrawn after
	// every key: keep the last redraw.
	lines := strings.Split(out.String(), "\n")
	for i, l := range lines {
		if j := strings.LastIndex(l, "\x1b[D"); j >= 0 {
			lines[i] = "(qemu) " + l[j+len("\x1b[D"):]
		}
		lines[i] = strings.NewReplacer("\x1b[K", "", "\x1b", "").Replace(lines[i])
	}
	return strings.Join(lines, "\n")
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
