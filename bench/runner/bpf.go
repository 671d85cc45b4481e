package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// progStat is one program as `bpftool prog show -j` reports it. With
// kernel.bpf_stats_enabled=1 the kernel adds run_time_ns and run_cnt;
// bpftool leaves them out while they are zero.
type progStat struct {
	ID        int    `json:"id"`
	Type      string `json:"type"`
	Name      string `json:"name"`
	RunTimeNs uint64 `json:"run_time_ns"`
	RunCnt    uint64 `json:"run_cnt"`
}

// progStats returns every loaded program by id.
func progStats(ctx context.Context) (map[int]progStat, error) {
	out, err := exec.CommandContext(ctx, "bpftool", "prog", "show", "-j").Output()
	if err != nil {
		return nil, fmt.Errorf("bpftool prog show: %w", err)
	}
	var ps []progStat
	if err := json.Unmarshal(out, &ps); err != nil {
		return nil, fmt.Errorf("bpftool prog show: %w", err)
	}
	m := make(map[int]progStat, len(ps))
	for _, p := range ps {
		m[p.ID] = p
	}
	return m, nil
}

// perfAttachment is one line of `bpftool perf show -j`: a program attached
// through a perf event (classic tracepoints, as bpftrace uses them).
type perfAttachment struct {
	PID        int    `json:"pid"`
	ProgID     int    `json:"prog_id"`
	FDType     string `json:"fd_type"`
	Tracepoint string `json:"tracepoint"`
}

// ownedPrograms returns the programs the process pid holds, mapped to the
// tracepoint each one is attached to ("" when that is not known). The
// machine may be shared, so programs are told apart by owner, never by
// appearing after a start: /proc/pid/fdinfo names the program of every
// program and link file descriptor (links also name their tracepoint), and
// `bpftool perf show` names the tracepoint of perf-event attachments.
func ownedPrograms(ctx context.Context, pid int) (map[int]string, error) {
	progs := map[int]string{}
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // the descriptor closed meanwhile
		}
		fields := map[string]string{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok {
				fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		f.Close()
		id, err := strconv.Atoi(fields["prog_id"])
		if err != nil {
			continue
		}
		if tp := fields["tp_name"]; tp != "" {
			progs[id] = tp
		} else if _, seen := progs[id]; !seen {
			progs[id] = ""
		}
	}

	out, err := exec.CommandContext(ctx, "bpftool", "perf", "show", "-j").Output()
	if err != nil {
		return nil, fmt.Errorf("bpftool perf show: %w", err)
	}
	var perf []perfAttachment
	if len(strings.TrimSpace(string(out))) > 0 {
		if err := json.Unmarshal(out, &perf); err != nil {
			return nil, fmt.Errorf("bpftool perf show: %w", err)
		}
	}
	for _, a := range perf {
		if a.PID == pid && a.FDType == "tracepoint" {
			progs[a.ProgID] = a.Tracepoint
		}
	}
	return progs, nil
}

// usage is run time and run count, summed.
type usage struct {
	ns, cnt uint64
}

func (u *usage) add(v usage) {
	u.ns += v.ns
	u.cnt += v.cnt
}

// perRun is the mean cost of one run in ns, or -1 with no runs.
func (u usage) perRun() float64 {
	if u.cnt == 0 {
		return -1
	}
	return float64(u.ns) / float64(u.cnt)
}

// delta is what each of ids used between two snapshots.
func delta(before, after map[int]progStat, ids map[int]string) map[int]usage {
	d := map[int]usage{}
	for id := range ids {
		a, ok := after[id]
		if !ok {
			continue
		}
		b := before[id]
		if a.RunCnt < b.RunCnt || a.RunTimeNs < b.RunTimeNs {
			continue // cannot happen for one program; guards against id reuse
		}
		d[id] = usage{ns: a.RunTimeNs - b.RunTimeNs, cnt: a.RunCnt - b.RunCnt}
	}
	return d
}
