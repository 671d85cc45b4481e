// A stand-in Go HTTP server for the --latency-uprobe test: handle serves
// each request in about a millisecond, and counts them.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

var served atomic.Int64

// handle is the function numatrace times: not inlined, so it has its
// own entry and return instructions.
//
//go:noinline
func handle(w http.ResponseWriter, r *http.Request) {
	time.Sleep(time.Millisecond)
	buf := make([]byte, 4096) // some work for the allocator
	for i := range buf {
		buf[i] = byte(i)
	}
	served.Add(1)
	fmt.Fprintf(w, "ok %d\n", buf[len(buf)-1])
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	http.HandleFunc("/", handle)
	http.HandleFunc("/served", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, served.Load()) })
	fmt.Println(ln.Addr())
	if err := http.Serve(ln, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
