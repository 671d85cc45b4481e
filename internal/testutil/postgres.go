package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// PostgresBin is where Debian puts PostgreSQL's server programs.
func PostgresBin(t *testing.T) string {
	t.Helper()
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Strings(found)
	RequireFeature(t, len(found) > 0, "PostgreSQL's server not installed (make deps installs Debian's postgresql)")
	return filepath.Dir(found[len(found)-1])
}

// StartPostgres makes a cluster in data, owned by the postgres user, and
// runs it on 127.0.0.1:port until the test ends.
func StartPostgres(t *testing.T, bin, data, port string) {
	t.Helper()
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "postgres:", data).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	asPostgres := func(args ...string) {
		t.Helper()
		cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	asPostgres(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	opts := "-p " + port + " -k " + data + " -c listen_addresses=127.0.0.1 -c fsync=off"
	asPostgres(filepath.Join(bin, "pg_ctl"), "-D", data, "-o", opts, "-l", filepath.Join(data, "log"), "-w", "start")
	t.Cleanup(func() {
		exec.Command("runuser", "-u", "postgres", "--", filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "stop").Run()
	})
}

// PostmasterPID is the pid a cluster in data runs as (its postmaster.pid).
func PostmasterPID(t *testing.T, data string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(strings.SplitN(string(b), "\n", 2)[0], &pid); err != nil {
		t.Fatalf("postmaster.pid: %q: %v", b, err)
	}
	return pid
}

// SharedTempDir is a temp dir other users (nginx's workers, postgres)
// can reach.
func SharedTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	return dir
}

// FreeTCPPort is a port of 127.0.0.1 nothing listened on a moment ago.
func FreeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
