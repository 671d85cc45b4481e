// Command mmaploop takes the mmap_lock for write over and over: it maps and
// unmaps a small anonymous region in a loop. Each mmap and each munmap fires
// mmap_lock:mmap_lock_start_locking and mmap_lock:mmap_lock_acquire_returned
// once. It prints how many map/unmap pairs it made.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dur := flag.Duration("duration", 2*time.Second, "how long to loop")
	size := flag.Int("size", 64<<10, "bytes mapped each time")
	flag.Parse()

	start := time.Now()
	deadline := start.Add(*dur)
	n := 0
	for time.Now().Before(deadline) {
		for i := 0; i < 256; i++ {
			addr, _, errno := unix.Syscall6(unix.SYS_MMAP, 0, uintptr(*size),
				unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uintptr(0), 0)
			if errno != 0 {
				fmt.Fprintf(os.Stderr, "mmaploop: mmap: %v\n", errno)
				os.Exit(1)
			}
			if _, _, errno := unix.Syscall(unix.SYS_MUNMAP, addr, uintptr(*size), 0); errno != 0 {
				fmt.Fprintf(os.Stderr, "mmaploop: munmap: %v\n", errno)
				os.Exit(1)
			}
			n++
		}
	}
	fmt.Printf("pairs %d seconds %.3f\n", n, time.Since(start).Seconds())
}
