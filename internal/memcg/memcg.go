// Package memcg reads the memory cgroup that limits a target: which group
// it is (cgroup v1's memory controller, or cgroup v2), its limit, what it
// holds and how much of that is page cache, and how often it hit the
// limit. doctor -p reads it, and attach reads it as a run starts and as it
// ends, so that the report's next step names the group and its figures.
//
// Every file is read through hostfs, inside a root ("/" live, a copy for
// doctor --root), read only and bounded. The figures a report shows are
// computed here once (Span's methods); the words are the caller's.
package memcg

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/numatrace/numatrace/internal/hostfs"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// Unlimited is a limit that is not set: "max" on cgroup v2, the page
// counter's maximum (9223372036854771712) on v1.
const Unlimited = ^uint64(0)

// v1Unlimited is where a v1 limit stops meaning anything: the kernel
// prints an unset limit as its page counter's maximum in bytes, a page
// short of 2^63.
const v1Unlimited = 1 << 62

// Reading is one look at the memory cgroup whose limit binds a target.
type Reading struct {
	// Group is the group read: the target's own, or the ancestor whose
	// limit is the tightest over it. It is named as --cgroup takes it:
	// relative to /sys/fs/cgroup where it is under it
	// ("memory/numatrace-e2e-redis"), else its absolute directory. It
	// comes from /proc/PID/cgroup and the mounts, and is escaped.
	Group string
	// Member is the target's own group when an ancestor's limit binds
	// (Group is then that ancestor); "" when the target is in Group.
	Member string
	// V2 says the group is on cgroup v2 (memory.max, memory.events),
	// not on v1's memory controller (memory.limit_in_bytes, failcnt).
	V2 bool
	// Limit is the group's hard limit in bytes: memory.limit_in_bytes
	// (v1) or memory.max (v2); Unlimited when none is set.
	Limit uint64
	// High is cgroup v2's memory.high, over which the kernel reclaims
	// and throttles the group's allocations; Unlimited when unset (and
	// on v1, which has none).
	High uint64
	// Usage is what the group holds: memory.usage_in_bytes (v1) or
	// memory.current (v2), its descendants' included.
	Usage uint64
	// Peak is the most it ever held: memory.max_usage_in_bytes (v1),
	// memory.peak (v2, since 5.19); 0 when the kernel keeps none.
	Peak uint64
	// File is the page cache charged to it (memory.stat's total_cache
	// on v1, file on v2), which counts against the limit; Anon its
	// anonymous memory (total_rss, anon).
	File, Anon uint64
	// Failcnt is how often the group's usage hit its limit (v1).
	Failcnt uint64
	// Events are cgroup v2's memory.events; on v1 only OOMKill is
	// known (memory.oom_control's oom_kill).
	Events Events
}

// Events are memory.events: how often the group went over memory.high
// (and was throttled), was about to go over memory.max (and reclaimed),
// ran out of memory, and had a process killed for it.
type Events struct {
	High, Max, OOM, OOMKill uint64
}

// Limited says whether a hard limit is set.
func (r *Reading) Limited() bool { return r.Limit != Unlimited }

// HighSet says whether memory.high is set.
func (r *Reading) HighSet() bool { return r.High != Unlimited }

// bound is the tighter of the group's limit and memory.high.
func (r *Reading) bound() uint64 { return min(r.Limit, r.High) }

// files are the names a version keeps its figures in.
type files struct {
	limit, usage, peak string
	total              bool // memory.stat has total_* keys for the hierarchy (v1)
}

var (
	v1Files = files{limit: "memory.limit_in_bytes", usage: "memory.usage_in_bytes", peak: "memory.max_usage_in_bytes", total: true}
	v2Files = files{limit: "memory.max", usage: "memory.current", peak: "memory.peak"}
)

// read reads the group in dir (relative to the root), named name.
func read(fs *hostfs.Root, dir, name string, v2 bool) (*Reading, error) {
	r := &Reading{Group: name, V2: v2, High: Unlimited}
	f := v1Files
	if v2 {
		f = v2Files
	}
	var err error
	if r.Limit, err = readLimit(fs, dir+"/"+f.limit); err != nil {
		return nil, err
	}
	if r.Usage, _, err = readUint(fs, dir+"/"+f.usage); err != nil {
		return nil, err
	}
	if r.Peak, _, err = readUint(fs, dir+"/"+f.peak); err != nil {
		return nil, err
	}
	if err := r.readStat(fs, dir+"/memory.stat", f.total); err != nil {
		return nil, err
	}
	if v2 {
		if r.High, err = readLimit(fs, dir+"/memory.high"); err != nil {
			return nil, err
		}
		return r, readKeyed(fs, dir+"/memory.events", map[string]*uint64{
			"high": &r.Events.High, "max": &r.Events.Max, "oom": &r.Events.OOM, "oom_kill": &r.Events.OOMKill})
	}
	if r.Failcnt, _, err = readUint(fs, dir+"/memory.failcnt"); err != nil {
		return nil, err
	}
	return r, readKeyed(fs, dir+"/memory.oom_control", map[string]*uint64{"oom_kill": &r.Events.OOMKill})
}

// readStat takes the page cache and the anonymous memory from
// memory.stat: v1's total_* keys count the descendants as usage does
// (its plain keys count the group's own pages only); v2's are already
// the whole subtree's.
func (r *Reading) readStat(fs *hostfs.Root, file string, total bool) error {
	keys := map[string]*uint64{"file": &r.File, "anon": &r.Anon}
	if total {
		keys = map[string]*uint64{"total_cache": &r.File, "total_rss": &r.Anon}
	}
	return readKeyed(fs, file, keys)
}

// readLimit reads a limit: "max" or a v1 limit past v1Unlimited is
// Unlimited; an absent file is none set.
func readLimit(fs *hostfs.Root, file string) (uint64, error) {
	s, err := fs.ReadValue(file)
	switch {
	case hostfs.Absent(err):
		return Unlimited, nil
	case err != nil:
		return 0, err
	case s == "max":
		return Unlimited, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: want a number of bytes or max, got %s", sanitize.Text(fs.Path(file)), hostfs.Excerpt(s))
	}
	if v >= v1Unlimited {
		return Unlimited, nil
	}
	return v, nil
}

// readUint reads a number of bytes or a count; ok is false (and v 0)
// when the file is absent.
func readUint(fs *hostfs.Root, file string) (v uint64, ok bool, err error) {
	s, err := fs.ReadValue(file)
	if hostfs.Absent(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if v, err = strconv.ParseUint(s, 10, 64); err != nil {
		return 0, false, fmt.Errorf("%s: not an unsigned number: %s", sanitize.Text(fs.Path(file)), hostfs.Excerpt(s))
	}
	return v, true, nil
}

// readKeyed reads the keys asked for from a "key value" file
// (memory.stat, memory.events, memory.oom_control); an absent file
// leaves them 0, as does an absent key.
func readKeyed(fs *hostfs.Root, file string, keys map[string]*uint64) error {
	err := fs.Scan(file, hostfs.MaxTable, func(_ int, line string) error {
		k, v, ok := strings.Cut(line, " ")
		dst := keys[k]
		if !ok || dst == nil {
			return nil
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: not an unsigned number: %s", hostfs.Excerpt(k), hostfs.Excerpt(v))
		}
		*dst = n
		return nil
	})
	if hostfs.Absent(err) {
		return nil
	}
	return err
}

// Value is one figure of a reading as the kernel gave it: the file it was
// read from (a key of it after a space: "memory.stat total_cache") and
// its value, "max" for a limit not set.
type Value struct {
	File, Value string
}

// Values are the reading's figures by the files they were read from,
// for evidence.
func (r *Reading) Values() []Value {
	limit := func(v uint64) string {
		if v == Unlimited {
			return "max"
		}
		return strconv.FormatUint(v, 10)
	}
	n := func(v uint64) string { return strconv.FormatUint(v, 10) }
	f := filesOf(r.V2)
	out := []Value{{f.limit, limit(r.Limit)}}
	if r.V2 {
		out = append(out, Value{"memory.high", limit(r.High)})
	}
	out = append(out, Value{f.usage, n(r.Usage)})
	if r.Peak > 0 {
		out = append(out, Value{f.peak, n(r.Peak)})
	}
	if r.V2 {
		return append(out, Value{"memory.stat file", n(r.File)}, Value{"memory.stat anon", n(r.Anon)},
			Value{"memory.events high", n(r.Events.High)}, Value{"memory.events max", n(r.Events.Max)},
			Value{"memory.events oom", n(r.Events.OOM)}, Value{"memory.events oom_kill", n(r.Events.OOMKill)})
	}
	return append(out, Value{"memory.stat total_cache", n(r.File)}, Value{"memory.stat total_rss", n(r.Anon)},
		Value{"memory.failcnt", n(r.Failcnt)}, Value{"memory.oom_control oom_kill", n(r.Events.OOMKill)})
}

// Path is where file of the group is, for people: under /sys/fs/cgroup
// where Group is named relative to it.
func (r *Reading) Path(file string) string {
	if strings.HasPrefix(r.Group, "/") {
		return r.Group + "/" + file
	}
	return cgroupRoot + "/" + r.Group + "/" + file
}
