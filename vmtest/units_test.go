package vmtest

import (
	"bytes"
	"compress/gzip"
	"io"
	"strconv"
	"testing"
)

// readCPIO parses a newc archive back: name → (mode, data, rdev major).
func readCPIO(t *testing.T, b []byte) map[string]cpioFile {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cpioFile{}
	field := func(h []byte, i int) int {
		v, err := strconv.ParseUint(string(h[6+8*i:14+8*i]), 16, 32)
		if err != nil {
			t.Fatalf("bad header field %d: %q", i, h[6+8*i:14+8*i])
		}
		return int(v)
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	for off := 0; off < len(raw); {
		h := raw[off : off+110]
		if string(h[:6]) != "070701" {
			t.Fatalf("bad magic at %d", off)
		}
		mode, size, major, minor, nameLen := field(h, 1), field(h, 6), field(h, 9), field(h, 10), field(h, 11)
		name := string(raw[off+110 : off+110+nameLen-1])
		off = align(off + 110 + nameLen)
		data := raw[off : off+size]
		off = align(off + size)
		if name == "TRAILER!!!" {
			return out
		}
		out[name] = cpioFile{name: name, mode: uint32(mode), data: data, major: uint32(major), minor: uint32(minor)}
	}
	t.Fatal("no trailer")
	return nil
}

func TestCPIOHasWhatTheKernelNeeds(t *testing.T) {
	var buf bytes.Buffer
	files := []cpioFile{
		{name: "dev", mode: sIFDIR | 0o755},
		{name: "dev/console", mode: sIFCHR | 0o600, major: 5, minor: 1},
		{name: "init", mode: sIFREG | 0o755, data: []byte("odd-length!")},
		{name: "bin/x", mode: sIFREG | 0o644, data: []byte("abcd")},
	}
	if err := writeCPIO(&buf, files); err != nil {
		t.Fatal(err)
	}
	got := readCPIO(t, buf.Bytes())
	if len(got) != len(files) {
		t.Fatalf("%d entries, want %d", len(got), len(files))
	}
	for _, f := range files {
		g, ok := got[f.name]
		if !ok || g.mode != f.mode || !bytes.Equal(g.data, f.data) || g.major != f.major || g.minor != f.minor {
			t.Errorf("%s: got %+v", f.name, g)
		}
	}
}

func TestParseLinesSkipsConsoleNoise(t *testing.T) {
	log := "[    1.0] random kernel line\r\n" +
		"NTBOOT {\"kernel\":\"6.1\"}\r\n" +
		"NTRESULT {\"scenario\":\"bind\",\"x\":1}\n" +
		"NTRESULT {broken json\n" +
		"prefix NTRESULT {\"scenario\":\"no\"}\n" +
		"NTDONE {}\n"
	lines := parseLines(log)
	if len(lines) != 3 || lines[0].Kind != "NTBOOT" || lines[1].Kind != "NTRESULT" || lines[2].Kind != "NTDONE" {
		t.Fatalf("lines %+v", lines)
	}
}

func TestWithinFivePercent(t *testing.T) {
	cases := []struct {
		ours, kernel int64
		ok           bool
	}{{100, 100, true}, {96, 100, true}, {105, 100, true}, {94, 100, false}, {106, 100, false}, {0, 0, true}, {1, 0, false}, {0, 5, false}}
	for _, c := range cases {
		if got := within5(c.ours, c.kernel); got != c.ok {
			t.Errorf("within5(%d, %d) = %v", c.ours, c.kernel, got)
		}
	}
}
