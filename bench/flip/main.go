// Command flip makes the scheduler migrate it: one thread flips its own CPU
// affinity between two CPUs in a loop, so every call moves it to the other
// CPU and fires sched:sched_migrate_task. It prints how many flips it made.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dur := flag.Duration("duration", 3*time.Second, "how long to flip")
	flag.Parse()

	runtime.LockOSThread()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		fmt.Fprintf(os.Stderr, "flip: sched_getaffinity: %v\n", err)
		os.Exit(1)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < 2; c++ {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		fmt.Fprintln(os.Stderr, "flip: needs at least two CPUs in its affinity mask")
		os.Exit(1)
	}
	var sets [2]unix.CPUSet
	sets[0].Set(cpus[0])
	sets[1].Set(cpus[1])

	start := time.Now()
	deadline := start.Add(*dur)
	n := 0
	for time.Now().Before(deadline) {
		for i := 0; i < 256; i++ {
			if err := unix.SchedSetaffinity(0, &sets[n&1]); err != nil {
				fmt.Fprintf(os.Stderr, "flip: sched_setaffinity: %v\n", err)
				os.Exit(1)
			}
			n++
		}
	}
	elapsed := time.Since(start)
	_ = unix.SchedSetaffinity(0, &all)
	fmt.Printf("flips %d seconds %.3f cpus %d,%d\n", n, elapsed.Seconds(), cpus[0], cpus[1])
}
