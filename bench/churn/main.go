// Command churn is a storm of short-lived threads: it starts -rate
// threads a second for -duration, and each maps and unmaps a page -pairs
// times (two mmap_lock acquisitions a pair) and exits. It waits for a line
// on stdin before it starts, and prints "threads N seconds S" when the
// last thread has exited. At most -parallel threads are alive at once: a
// machine that cannot keep the pace gets fewer threads, not thousands
// waiting (the Go runtime stops at 10,000).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	rate := flag.Int("rate", 2000, "threads started per second")
	dur := flag.Duration("duration", 3*time.Minute, "how long to start threads")
	pairs := flag.Int("pairs", 22, "mmap+munmap pairs per thread")
	parallel := flag.Int("parallel", 64, "threads alive at once, at most")
	flag.Parse()
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		os.Exit(1)
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, *parallel)
	start := time.Now()
	n := 0
	for {
		el := time.Since(start)
		if el >= *dur {
			break
		}
		// Catch up to the rate, then sleep: the pace holds on a busy machine.
		for due := int(el.Seconds() * float64(*rate)); n < due; n++ {
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				// Never unlocked: the thread exits with the goroutine.
				runtime.LockOSThread()
				for j := 0; j < *pairs; j++ {
					addr, _, errno := unix.Syscall6(unix.SYS_MMAP, 0, 4096, unix.PROT_READ,
						unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uintptr(0), 0)
					if errno != 0 {
						fmt.Fprintln(os.Stderr, "churn: mmap:", errno)
						os.Exit(1)
					}
					unix.Syscall(unix.SYS_MUNMAP, addr, 4096, 0)
				}
			}()
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	fmt.Printf("threads %d seconds %.3f\n", n, time.Since(start).Seconds())
}
