package testutil

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Redis is a redis-server started for a test, on a free port of 127.0.0.1.
type Redis struct {
	Cmd  *exec.Cmd
	Port int
}

// StartRedis starts redis-server (no persistence) and waits until it
// answers; it is killed as the test ends. Without redis-server the test
// is skipped, as RequireFeature does (failed in CI).
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	RequireFeature(t, err == nil, "redis-server is not installed")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r := &Redis{Cmd: cmd, Port: port}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := r.Dial()
		if err == nil {
			_, err = c.Do("PING")
			c.Close()
			if err == nil {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d does not answer: %v", port, err)
		}
	}
}

// RedisConn is one client connection speaking RESP.
type RedisConn struct {
	net.Conn
	rd *bufio.Reader
}

// Dial opens a connection to the server.
func (r *Redis) Dial() (*RedisConn, error) {
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.Port))
	if err != nil {
		return nil, err
	}
	return &RedisConn{Conn: c, rd: bufio.NewReader(c)}, nil
}

// Do sends one command and reads its one-line reply (+OK, $n bulk, ...).
func (c *RedisConn) Do(args ...string) (string, error) {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write(b); err != nil {
		return "", err
	}
	line, err := c.rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(line) > 0 && line[0] == '$' {
		n, _ := strconv.Atoi(line[1 : len(line)-2])
		if n >= 0 {
			body := make([]byte, n+2)
			if _, err := io.ReadFull(c.rd, body); err != nil {
				return "", err
			}
			return string(body[:n]), nil
		}
	}
	return line, nil
}
