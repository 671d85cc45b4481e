package main

import (
	bin "encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/testutil"
)

// serve runs for days beside every process of the machine, any of which
// may be an unprivileged user's: one run of serve is kept up through
// what such users did to it (issue 43). A program of nobody's with a
// crafted .gopclntab (4 KB that claim 2^30 functions: debug/gosym asked
// for 96 GB, and the runtime's out-of-memory death took serve down) and
// one whose path nobody swaps for a link to a root-only program both
// stall in memcg reclaim with their stacks taken, while 16 clients ask
// for the stall profile of the last 10 minutes over and over; /metrics
// answers throughout, serve is alive at the end, and the profile names
// nothing of the root-only program.
func TestServeSurvivesHostileUsers(t *testing.T) {
	testutil.RequireRoot(t)
	dir := testutil.SharedTempDir(t)
	home := filepath.Join(dir, "nobody")
	os.Mkdir(home, 0o755)
	os.Chown(home, 65534, 65534)
	build := func(name string, flags ...string) string {
		out := filepath.Join(home, name)
		args := append([]string{"-O2", "-fno-omit-frame-pointer", "-pthread", "-o", out, "testdata/stackprog.c"}, flags...)
		if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, b)
		}
		os.Chown(out, 65534, 65534)
		return out
	}
	crafted := build("crafted")
	pcln := make([]byte, 4096)
	bin.LittleEndian.PutUint32(pcln, 0xfffffff1) // Go 1.20's magic
	pcln[6], pcln[7] = 1, 8
	bin.LittleEndian.PutUint64(pcln[8:], 1<<30)
	for i := 1; i < 8; i++ {
		bin.LittleEndian.PutUint64(pcln[8+8*i:], 80)
	}
	table := filepath.Join(dir, "pclntab")
	os.WriteFile(table, pcln, 0o644)
	if b, err := exec.Command("objcopy", "--add-section", ".gopclntab="+table, crafted).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, b)
	}
	swapped := build("swapped")
	secret := filepath.Join(dir, "secret")
	if b, err := exec.Command("gcc", "-O2", "-fno-omit-frame-pointer", "-pthread", "-o", secret, "testdata/stackprog.c",
		"-Dread_the_file=root_only_secret_read", "-Dtouch_the_heap=root_only_secret_touch").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	os.Chmod(secret, 0o700)

	listen, serve, serveErr := startServe(t, "--stacks-min", "2us")
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()

	// /metrics is scraped every 100 ms, and the profile asked for by 16
	// clients at once, until the users are done.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var scrapes, profiles, refused atomic.Int64
	var failures sync.Map
	client := http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, []byte, error) {
		resp, err := client.Get("http://" + listen + path)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if code, _, err := get("/metrics"); err != nil || code != http.StatusOK {
				failures.Store(fmt.Sprintf("/metrics: %d %v", code, err), true)
			} else {
				scrapes.Add(1)
			}
		}
	}()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, _, err := get("/debug/pprof/stalls?seconds=600")
				switch {
				case err != nil:
					failures.Store(fmt.Sprintf("profile: %v", err), true)
					time.Sleep(100 * time.Millisecond)
				case code == http.StatusOK:
					profiles.Add(1)
				default: // too many at once: said, and promptly
					refused.Add(1)
				}
			}
		}()
	}

	cg := testutil.MemcgCgroup(t, "numatrace-e2e-hostile-serve", 64<<20)
	file := testutil.BigFile(t)
	asNobody := func(prog string, args ...string) *exec.Cmd {
		cmd := exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec setpriv --reuid 65534 --regid 65534 --clear-groups "$@"`, cg, prog}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	if err := asNobody(crafted, file, "heap").Wait(); err != nil {
		t.Errorf("the crafted program: %v", err)
	}
	sw := asNobody(swapped, file, file, "heap")
	time.Sleep(500 * time.Millisecond)
	swap := exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
		"sh", "-c", `mv "$1" "$1.old" && ln -s "$2" "$1"`, "sh", swapped, secret)
	if b, err := swap.CombinedOutput(); err != nil {
		t.Fatalf("swap: %v\n%s", err, b)
	}
	if err := sw.Wait(); err != nil {
		t.Errorf("the swapped program: %v", err)
	}
	time.Sleep(time.Second) // the last stalls reach serve
	close(stop)
	wg.Wait()

	select {
	case err := <-exited:
		t.Fatalf("serve exited (%v): %s", err, serveErr.String())
	default:
	}
	failures.Range(func(k, _ any) bool {
		t.Errorf("%s", k)
		return true
	})
	code, prof, err := get("/debug/pprof/stalls?seconds=600")
	if err != nil || code != http.StatusOK {
		t.Fatalf("the last profile: %d %v", code, err)
	}
	path := filepath.Join(t.TempDir(), "stalls.pb.gz")
	os.WriteFile(path, prof, 0o600)
	top := pprofTop(t, path)
	if strings.Contains(top, "root_only_secret") {
		t.Errorf("the profile names the root-only program's functions:\n%s", top)
	}
	if !topHas(top, "read_the_file") {
		t.Errorf("the profile has no stack of the users' programs:\n%s", top)
	}
	t.Logf("%d scrapes, %d profiles served, %d refused as too many at once", scrapes.Load(), profiles.Load(), refused.Load())
}
