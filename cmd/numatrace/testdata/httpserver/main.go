// Command httpserver is a Go net/http service for the kernel request
// source's test: it listens on 127.0.0.1 (port 0: any), prints the port,
// and answers GET /item with a small JSON document, as a typical service
// would, until killed. It is built by the test (testdata is not part of
// the module's packages).
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
)

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
		k := r.URL.Query().Get("k")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"key": k, "value": items[k]})
	})
	fmt.Fprintln(os.Stderr, http.Serve(ln, nil))
	os.Exit(1)
}
