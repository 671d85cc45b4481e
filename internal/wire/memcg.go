package wire

import "github.com/numatrace/numatrace/internal/memcg"

// Memcg is a memory cgroup's reading (memcg.Reading) as doctor's JSON,
// a recording's header and end record, and the report's JSON summary
// write it. A limit that is not set is absent, not a number.
type Memcg struct {
	Group      string  `json:"group"`            // as --cgroup takes it: "memory/redis", "system.slice/redis.service"
	Member     string  `json:"member,omitempty"` // the target's own group, when Group is an ancestor whose limit binds
	Version    int     `json:"version"`          // 1 or 2
	LimitBytes *uint64 `json:"limit_bytes,omitempty"`
	HighBytes  *uint64 `json:"high_bytes,omitempty"` // cgroup v2's memory.high
	UsageBytes uint64  `json:"usage_bytes"`
	PeakBytes  uint64  `json:"peak_bytes,omitempty"` // 0: the kernel keeps none
	FileBytes  uint64  `json:"file_bytes"`           // page cache
	AnonBytes  uint64  `json:"anon_bytes"`
	Failcnt    uint64  `json:"failcnt,omitempty"` // v1
	// Events are cgroup v2's memory.events (v1: oom_kill only).
	Events MemcgEvents `json:"events"`
}

// MemcgEvents are memory.events' counts.
type MemcgEvents struct {
	High    uint64 `json:"high"`
	Max     uint64 `json:"max"`
	OOM     uint64 `json:"oom"`
	OOMKill uint64 `json:"oom_kill"`
}

// NewMemcg is r in the formats' shape; nil stays nil.
func NewMemcg(r *memcg.Reading) *Memcg {
	if r == nil {
		return nil
	}
	j := &Memcg{Group: r.Group, Member: r.Member, Version: 1, LimitBytes: limitJSON(r.Limit), HighBytes: limitJSON(r.High),
		UsageBytes: r.Usage, PeakBytes: r.Peak, FileBytes: r.File, AnonBytes: r.Anon, Failcnt: r.Failcnt,
		Events: MemcgEvents{High: r.Events.High, Max: r.Events.Max, OOM: r.Events.OOM, OOMKill: r.Events.OOMKill}}
	if r.V2 {
		j.Version = 2
	}
	return j
}

// Reading is j as the domain has it; nil stays nil.
func (j *Memcg) Reading() *memcg.Reading {
	if j == nil {
		return nil
	}
	return &memcg.Reading{Group: j.Group, Member: j.Member, V2: j.Version == 2, Limit: limitOf(j.LimitBytes), High: limitOf(j.HighBytes),
		Usage: j.UsageBytes, Peak: j.PeakBytes, File: j.FileBytes, Anon: j.AnonBytes, Failcnt: j.Failcnt,
		Events: memcg.Events{High: j.Events.High, Max: j.Events.Max, OOM: j.Events.OOM, OOMKill: j.Events.OOMKill}}
}

func limitJSON(v uint64) *uint64 {
	if v == memcg.Unlimited {
		return nil
	}
	return &v
}

func limitOf(v *uint64) uint64 {
	if v == nil {
		return memcg.Unlimited
	}
	return *v
}
