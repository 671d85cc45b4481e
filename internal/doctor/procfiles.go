package doctor

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/sanitize"
	"github.com/numatrace/numatrace/internal/topology"
)

// The /proc files doctor reads besides the counters (procsnap) and the
// topology. They are parsed here rather than with prometheus/procfs,
// which opens paths itself: it follows symlinks out of a copy, blocks on
// a FIFO, and parses counters as signed. Every read goes through
// hostfs, confined to the root and bounded; every error names the file.

// meminfo is /proc/meminfo: values in kB where the file says kB, counts
// (HugePages_*) as they are.
type meminfo map[string]uint64

func (mi meminfo) get(key string) (uint64, bool) {
	v, ok := mi[key]
	return v, ok
}

func readMeminfo(fs *hostfs.Root) (meminfo, error) {
	mi := meminfo{}
	err := fs.Scan("proc/meminfo", hostfs.MaxTable, func(_ int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		key, rest, ok := strings.Cut(line, ":")
		f := strings.Fields(rest)
		if !ok || strings.ContainsAny(key, " \t") || len(f) == 0 || len(f) > 2 || (len(f) == 2 && f[1] != "kB") {
			return fmt.Errorf("want \"Key: value [kB]\", got %s", hostfs.Excerpt(line))
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: not an unsigned number: %s", hostfs.Excerpt(key), hostfs.Excerpt(f[0]))
		}
		mi[key] = v
		return nil
	})
	return mi, err
}

// readZoneinfo parses /proc/zoneinfo: per node, its zones in the order
// the kernel lists them (the zone index, which indexes protection).
func readZoneinfo(fs *hostfs.Root) (map[int][]zone, error) {
	out := map[int][]zone{}
	var z *zone
	var node int
	done := func() {
		if z != nil {
			out[node] = append(out[node], *z)
			z = nil
		}
	}
	err := fs.Scan("proc/zoneinfo", hostfs.MaxTable, func(_ int, line string) error {
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil
		}
		if f[0] == "Node" {
			n, name, err := parseZoneHeader(line, f)
			if err != nil {
				return err
			}
			done()
			node, z = n, &zone{name: name}
			return nil
		}
		if z == nil {
			return nil
		}
		if f[0] == "protection:" {
			return z.parseProtection(f)
		}
		return z.parseCount(line, f)
	})
	done()
	return out, err
}

// parseZoneHeader parses "Node 0, zone   Normal", split into f.
func parseZoneHeader(line string, f []string) (node int, name string, err error) {
	if len(f) != 4 || f[2] != "zone" || !strings.HasSuffix(f[1], ",") {
		return 0, "", fmt.Errorf("want \"Node N, zone NAME\", got %s", hostfs.Excerpt(line))
	}
	n, err := strconv.Atoi(strings.TrimSuffix(f[1], ","))
	if err != nil || n < 0 || n >= maxNodes {
		return 0, "", fmt.Errorf("bad node %s", hostfs.Excerpt(f[1]))
	}
	return n, f[3], nil
}

// parseProtection parses "protection: (0, 1916, 63800, 63800, 63800)",
// split into f, into z's lowmem_reserve.
func (z *zone) parseProtection(f []string) error {
	list := strings.Trim(strings.Join(f[1:], ""), "()")
	z.protection = z.protection[:0]
	for _, p := range strings.Split(list, ",") {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return fmt.Errorf("zone %s protection: not an unsigned number: %s", hostfs.Excerpt(z.name), hostfs.Excerpt(p))
		}
		z.protection = append(z.protection, v)
	}
	return nil
}

// parseCount reads one of the zone's counts the doctor uses (free pages
// and the watermarks) from line, split into f; other lines are skipped.
func (z *zone) parseCount(line string, f []string) error {
	key := f[0]
	if key == "pages" && len(f) == 3 && f[1] == "free" { // "pages free     3800"
		key, f = "nr_free_pages", f[1:]
	}
	var dst *uint64
	switch key {
	case "nr_free_pages":
		dst = &z.free
	case "min":
		dst = &z.min
	case "low":
		dst = &z.low
	case "high":
		dst = &z.high
	case "managed":
		dst = &z.managed
	default:
		return nil
	}
	if len(f) != 2 {
		return fmt.Errorf("zone %s: want \"%s N\", got %s", hostfs.Excerpt(z.name), key, hostfs.Excerpt(line))
	}
	v, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return fmt.Errorf("zone %s %s: not an unsigned number: %s", hostfs.Excerpt(z.name), key, hostfs.Excerpt(f[1]))
	}
	*dst = v
	return nil
}

// maxNodes bounds node numbers read from a copy (the kernel allows 1024).
const maxNodes = 1024

// readSysctl reads an integer sysctl, nil when the file is absent.
func readSysctl(fs *hostfs.Root, name string) (*int64, error) {
	file := "proc/sys/" + strings.ReplaceAll(name, ".", "/")
	s, err := fs.ReadValue(file)
	if hostfs.Absent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s: not an integer: %s", pathOf(fs, file), hostfs.Excerpt(s))
	}
	return &v, nil
}

// psiStats is a PSI file (/proc/pressure/memory, a cgroup's
// memory.pressure):
//
//	some avg10=0.00 avg60=0.00 avg300=0.00 total=0
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
type psiStats struct{ some, full *psiLine }

type psiLine struct {
	avg10, avg60, avg300 float64 // percent of time stalled
	total                uint64  // µs stalled since boot
}

func readPSI(fs *hostfs.Root, file string) (*psiStats, error) {
	st := &psiStats{}
	err := fs.Scan(file, hostfs.MaxTable, func(_ int, line string) error {
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil
		}
		if len(f) != 5 || (f[0] != "some" && f[0] != "full") {
			return fmt.Errorf("want \"some|full avg10=.. avg60=.. avg300=.. total=..\", got %s", hostfs.Excerpt(line))
		}
		l := &psiLine{}
		for i, dst := range []*float64{&l.avg10, &l.avg60, &l.avg300} {
			k := [...]string{"avg10", "avg60", "avg300"}[i]
			v, ok := strings.CutPrefix(f[i+1], k+"=")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil || math.IsNaN(x) || x < 0 || x > 100 {
				return fmt.Errorf("bad %s (a percentage): %s", k, hostfs.Excerpt(f[i+1]))
			}
			*dst = x
		}
		v, ok := strings.CutPrefix(f[4], "total=")
		var err error
		if l.total, err = strconv.ParseUint(v, 10, 64); !ok || err != nil {
			return fmt.Errorf("bad total: %s", hostfs.Excerpt(f[4]))
		}
		if f[0] == "some" {
			st.some = l
		} else {
			st.full = l
		}
		return nil
	})
	return st, err
}

// procStat is what doctor needs of /proc/PID/stat or its threads'.
type procStat struct {
	ticks uint64 // utime + stime, in clock ticks
	cpu   int    // the CPU it last ran on
}

// userHZ is the unit of utime and stime: USER_HZ is 100 on every
// architecture Linux runs on.
const userHZ = 100

// readStat parses "pid (comm) state ppid ... utime stime ... processor ...":
// comm may hold spaces and parentheses, so the fields count from the
// last ")".
func readStat(fs *hostfs.Root, file string) (procStat, error) {
	b, err := fs.ReadFile(file)
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime 15, processor 39.
	if i < 0 || len(f) < 37 {
		return procStat{}, fmt.Errorf("%s: want \"pid (comm) state ...\" with 39 fields or more, got %s", pathOf(fs, file), hostfs.Excerpt(s))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	cpu, err3 := strconv.Atoi(f[36])
	if err1 != nil || err2 != nil || err3 != nil || utime > math.MaxUint64-stime || cpu < 0 {
		return procStat{}, fmt.Errorf("%s: bad utime, stime or processor: %s %s %s", pathOf(fs, file),
			hostfs.Excerpt(f[11]), hostfs.Excerpt(f[12]), hostfs.Excerpt(f[36]))
	}
	return procStat{ticks: utime + stime, cpu: cpu}, nil
}

// status is what doctor needs of /proc/PID/status.
type status struct {
	cpus, mems []int // Cpus_allowed_list, Mems_allowed_list
	threads    int
}

func readStatus(fs *hostfs.Root, file string) (status, error) {
	var st status
	err := fs.Scan(file, hostfs.MaxTable, func(_ int, line string) error {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil
		}
		v = strings.TrimSpace(v)
		var err error
		switch k {
		case "Cpus_allowed_list":
			st.cpus, err = topology.ParseList(v)
		case "Mems_allowed_list":
			st.mems, err = topology.ParseList(v)
		case "Threads":
			if st.threads, err = strconv.Atoi(v); err != nil || st.threads < 0 {
				err = fmt.Errorf("not a count: %s", hostfs.Excerpt(v))
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
	return st, err
}

// cgroupLine is a line of /proc/PID/cgroup: "hierarchy-ID:controllers:path".
type cgroupLine struct {
	hierarchy int
	path      string
	line      string
}

func readCgroups(fs *hostfs.Root, file string) ([]cgroupLine, error) {
	var out []cgroupLine
	err := fs.Scan(file, hostfs.MaxTable, func(_ int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		f := strings.SplitN(line, ":", 3)
		id, err := strconv.Atoi(f[0])
		if len(f) != 3 || err != nil || id < 0 {
			return fmt.Errorf("want \"ID:controllers:path\", got %s", hostfs.Excerpt(line))
		}
		out = append(out, cgroupLine{hierarchy: id, path: f[2], line: line})
		return nil
	})
	return out, err
}

// readComm reads a /proc/PID/comm: the name without its newline.
func readComm(fs *hostfs.Root, file string) (string, error) {
	b, err := fs.ReadFile(file)
	return strings.TrimSuffix(string(b), "\n"), err
}

// pids lists the processes under proc: the numeric directory names.
func pids(fs *hostfs.Root, dir string) ([]int, error) {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 0 && e.IsDir() {
			out = append(out, n)
		}
	}
	return out, nil
}

// pathOf names a file of the root in a message, escaped.
func pathOf(fs *hostfs.Root, file string) string { return sanitize.Text(fs.Path(file)) }
