// Command threads starts N threads that each change CPU once (one task
// migration each, so numatrace tracks every one of them), then holds them
// until stdin closes. It prints "threads N" once all have moved.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"

	"golang.org/x/sys/unix"
)

func main() {
	n := flag.Int("n", 10000, "threads")
	flag.Parse()
	debug.SetMaxThreads(*n + 1000)
	ncpu := runtime.NumCPU()
	var moved sync.WaitGroup
	release := make(chan struct{})
	errs := make(chan error, 1)
	for i := 0; i < *n; i++ {
		moved.Add(1)
		go func(i int) {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			for _, cpu := range []int{i % ncpu, (i + 1) % ncpu} {
				var set unix.CPUSet
				set.Set(cpu)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
			moved.Done()
			<-release
		}(i)
	}
	moved.Wait()
	select {
	case err := <-errs:
		fmt.Fprintln(os.Stderr, "threads:", err)
		os.Exit(1)
	default:
	}
	fmt.Printf("threads %d\n", *n)
	io.Copy(io.Discard, os.Stdin)
	close(release)
}
