// Command httpserver is a Go net/http service for the kernel request
// source's tests: it listens on -addr (127.0.0.1, port 0: any), prints
// the port, and answers GET /item with a small JSON document, as a
// typical service would, -delay after the request, until killed. It is
// built by the test (testdata is not part of the module's packages).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "the address to listen on")
	delay := flag.Duration("delay", 0, "how long each request takes")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	items := map[string]string{}
	for i := 0; i < 1000; i++ {
		items[strconv.Itoa(i)] = fmt.Sprintf("value-%d", i)
	}
	http.HandleFunc("/item", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(*delay)
		k := r.URL.Query().Get("k")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"key": k, "value": items[k]})
	})
	fmt.Fprintln(os.Stderr, http.Serve(ln, nil))
	os.Exit(1)
}
