//go:build linux

package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MariaDB is a mariadbd a test runs: its process, its TCP port on
// 127.0.0.1, its socket and its data directory.
type MariaDB struct {
	Cmd     *exec.Cmd
	Port    int
	Socket  string
	DataDir string
	client  string
}

// StartMariaDB makes a data directory under dir (owned by the mysql user)
// and runs Debian's mariadbd on it with these server options besides its
// own (--innodb-buffer-pool-size=16M, ...), on 127.0.0.1:port and a socket
// in dir, until the test ends. root may connect without a password.
func StartMariaDB(t testing.TB, dir string, port int, opts ...string) *MariaDB {
	t.Helper()
	RequireRoot(t)
	server := RequireTool(t, "mariadbd", "mariadb-server")
	install := RequireTool(t, "mariadb-install-db", "mariadb-server")
	data := filepath.Join(dir, "data")
	db := &MariaDB{Port: port, Socket: filepath.Join(dir, "mysqld.sock"), DataDir: data, client: RequireTool(t, "mariadb", "mariadb-server")}
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", "mysql:", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) { // a temp dir's ancestors, for the mysql user
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.Chmod(d, fi.Mode().Perm()|0o011)
		}
	}
	if out, err := exec.Command(install, "--no-defaults", "--user=mysql", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v: %s", err, out)
	}
	args := append([]string{"--no-defaults", "--user=mysql", "--datadir=" + data, "--socket=" + db.Socket,
		"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--log-error=" + filepath.Join(dir, "error.log")}, opts...)
	db.Cmd = exec.Command(server, args...)
	db.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := db.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Cmd.Process.Kill(); db.Cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return db
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
	t.Fatalf("mariadbd did not listen on %s: %s", addr, log)
	return nil
}

// Query runs SQL through the socket as root and returns its output, tab
// separated, without column names.
func (db *MariaDB) Query(t testing.TB, sql string) string {
	t.Helper()
	out, err := exec.Command(db.client, "--no-defaults", "-S", db.Socket, "-uroot", "-N", "-B", "-e", sql).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb -e %q: %v: %s", sql, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Status is a global status counter (SHOW GLOBAL STATUS).
func (db *MariaDB) Status(t testing.TB, name string) uint64 {
	t.Helper()
	f := strings.Fields(db.Query(t, "SHOW GLOBAL STATUS LIKE '"+name+"'"))
	if len(f) != 2 {
		t.Fatalf("status %s: %q", name, f)
	}
	v, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		t.Fatalf("status %s: %v", name, err)
	}
	return v
}
