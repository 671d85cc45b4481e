// Threadstorm runs many short-lived threads that each take the process's
// mmap_lock a few times: more threads with a stall than the kernel's
// histogram map holds. It starts on a line from stdin, prints "done" and
// the number of threads it ran, and exits when stdin closes. With -move
// each thread also moves itself to another CPU once (a task migration).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

func main() {
	threads := flag.Int("threads", 36000, "threads to run, one after another")
	parallel := flag.Int("parallel", 8, "threads alive at once")
	pairs := flag.Int("pairs", 2, "mmap+munmap pairs per thread")
	move := flag.Bool("move", false, "each thread moves to another CPU once")
	flag.Parse()
	ncpu := runtime.NumCPU()
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		os.Exit(1)
	}
	slots := make(chan struct{}, *parallel)
	var wg sync.WaitGroup
	for i := 0; i < *threads; i++ {
		slots <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-slots }()
			// Never unlocked: the thread ends with the goroutine, so
			// each goroutine runs on a thread of its own.
			runtime.LockOSThread()
			for c := i; *move && c < i+2; c++ { // on one CPU, then the next
				var set unix.CPUSet
				set.Set(c % ncpu)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					fmt.Fprintln(os.Stderr, "threadstorm:", err)
					os.Exit(1)
				}
			}
			for j := 0; j < *pairs; j++ {
				if b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err == nil {
					unix.Munmap(b)
				}
			}
		}(i)
	}
	wg.Wait()
	fmt.Println("done", *threads)
	io.Copy(io.Discard, in)
}
