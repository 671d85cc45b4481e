// Command floor attaches an empty tp_btf program (it only returns 0) to a
// raw tracepoint, sched_migrate_task by default (or to each of several), and holds it until SIGINT or
// SIGTERM. Its run_time_ns / run_cnt is the floor: what any tp_btf program
// costs on that tracepoint on this machine, including the clock reads that
// kernel.bpf_stats_enabled adds. It prints "ready" once attached.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

func main() {
	tps := flag.String("tracepoint", "sched_migrate_task", "raw tracepoints to attach to (tp_btf), comma-separated")
	name := flag.String("name", "floor_migrate", "program name, as bpftool shows it (at most 15 characters); with several tracepoints, a number is added")
	flag.Parse()

	for i, tp := range strings.Split(*tps, ",") {
		n := *name
		if strings.Contains(*tps, ",") {
			n = fmt.Sprintf("%.13s%d", *name, i)
		}
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name:       n,
			Type:       ebpf.Tracing,
			AttachType: ebpf.AttachTraceRawTp,
			AttachTo:   tp,
			License:    "GPL",
			Instructions: asm.Instructions{
				asm.Mov.Imm(asm.R0, 0),
				asm.Return(),
			},
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "floor: load tp_btf/%s: %v\n", tp, err)
			os.Exit(1)
		}
		defer prog.Close()
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			fmt.Fprintf(os.Stderr, "floor: attach tp_btf/%s: %v\n", tp, err)
			os.Exit(1)
		}
		defer l.Close()
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	fmt.Println("ready")
	<-sig
}
