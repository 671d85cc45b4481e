// The stacks tests' Go workload, as stackprog.c: reads files from
// readTheFile and touches fresh anonymous memory from touchTheHeap.
package main

import (
	"fmt"
	"os"
	"syscall"
)

var buf = make([]byte, 1<<20)

//go:noinline
func readTheFile(path string) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	total := 0
	for {
		n, err := f.Read(buf)
		total += n
		if err != nil || n == 0 {
			return total
		}
	}
}

//go:noinline
func touchTheHeap(mib int) int {
	p, err := syscall.Mmap(-1, 0, mib<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sum := 0
	for i := 0; i < len(p); i += 4096 {
		p[i] = 1
		sum += int(p[i])
	}
	syscall.Munmap(p)
	return sum
}

func main() {
	total := 0
	for _, a := range os.Args[1:] {
		if a == "heap" {
			total += touchTheHeap(48)
		} else {
			total += readTheFile(a)
		}
	}
	fmt.Println(total)
}
