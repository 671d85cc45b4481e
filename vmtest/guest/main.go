// Command ntguest is PID 1 of numatrace's two-node test guest. It mounts
// the kernel file systems, runs the scenarios named on the kernel command
// line (nt.scenarios=a,b,c) under numatrace, prints one result line per
// scenario on the console, and powers off. Run as "ntguest scenario NAME"
// it is the workload itself.
//
// Every line the host reads starts with "NT" and is one JSON document.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "scenario" {
		if err := runWorkload(os.Args[2]); err != nil {
			fmt.Fprintf(os.Stderr, "ntguest: %s: %v\n", os.Args[2], err)
			os.Exit(1)
		}
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "ntguest: run as the guest's init, or as: ntguest scenario NAME")
		os.Exit(2)
	}
	initGuest()
}

// emit prints one NT line for the host.
func emit(kind string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	fmt.Printf("\n%s %s\n", kind, b)
}

func initGuest() {
	defer powerOff()
	for _, m := range []struct{ src, dst, fs string }{
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/tmp", "tmpfs"},
		{"debugfs", "/sys/kernel/debug", "debugfs"},
		{"tracefs", "/sys/kernel/tracing", "tracefs"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, 0, ""); err != nil && m.fs != "tracefs" {
			emit("NTERROR", map[string]string{"mount": m.dst, "error": err.Error()})
		}
	}
	loadRamdisk()
	cmdline, _ := os.ReadFile("/proc/cmdline")
	var scenarios []string
	for _, f := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(f, "nt.scenarios="); ok {
			scenarios = strings.FieldsFunc(v, func(r rune) bool { return r == ',' })
		}
	}
	emit("NTBOOT", map[string]any{"kernel": release(), "scenarios": scenarios, "nodes": nodes()})
	if tool, n, load, ok := loopConfig(); ok {
		runLoop(tool, n, load)
	}
	for _, s := range scenarios {
		start := time.Now()
		res, err := runScenario(s)
		if err != nil {
			emit("NTERROR", map[string]string{"scenario": s, "error": err.Error()})
			continue
		}
		res["wall_ms"] = time.Since(start).Milliseconds()
		emit("NTRESULT", res)
	}
	emit("NTDONE", map[string]string{"kernel": release()})
}

func powerOff() {
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func release() string {
	var u unix.Utsname
	unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}

func nodes() []string {
	ents, _ := os.ReadDir("/sys/devices/system/node")
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "node") {
			out = append(out, e.Name())
		}
	}
	return out
}

// loadRamdisk loads brd, if the initramfs has it, as a 1.5 GiB disk whose
// blocks become page cache when read (see readRamdisk).
func loadRamdisk() {
	f, err := os.Open("/lib/brd.ko")
	if err != nil {
		return
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "rd_nr=1 rd_size=1572864 max_part=0", 0); err != nil {
		emit("NTERROR", map[string]string{"insmod": "brd", "error": err.Error()})
	}
}
