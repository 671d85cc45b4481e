package main

import (
	"fmt"
	"io"
	"strings"
)

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// render writes the throughput, recording-size and memory sections.
func (ex *extra) render(w io.Writer) {
	ex.renderThroughput(w)
	ex.renderRecordingSizes(w)
	ex.renderMemory(w)
}

// renderThroughput writes what each tracer costs each workload's throughput.
func (ex *extra) renderThroughput(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("")
	p("## Cost to the workload")
	p("")
	p("Throughput of each workload with nothing attached (baseline), numatrace (system-wide, defaults), the bpftrace script and `perf record -a` on the same tracepoints (%s). Phases rotate over %d rounds; BPF stats are off here. The ratio is the median over rounds of the workload's throughput against the baseline of the same round (target ≥ 0.99 for numatrace); throughputs are means.", strings.Join(perfEvents, ", "), len(ex.throughput["baseline"][thrAffinity]))
	p("")
	p("| workload | unit | baseline | numatrace | ratio | bpftrace | ratio | perf record | ratio | numatrace per round | target | result |")
	p("|---|---|--:|--:|--:|--:|--:|--:|--:|---|---|---|")
	for _, wl := range throughputWorkloads {
		p("%s", ex.throughputRow(wl))
	}
	p("")
	p("stress-ng runs 2 workers per stressor for the phase length; the memcg workload is the one above (reads of the file inside the 64 MiB cgroup after dropping caches); `bench/mmaploop` runs one thread for the phase length; the compile loop runs gcc -O0 -c on a 15-line file over and over for the phase length (40 times at least). On a 2-CPU VM shared with other tenants, round-to-round noise is a few percent: read the per-round ratios before the means.")
}

// throughputRow is workload wl's row of the throughput table.
func (ex *extra) throughputRow(wl string) string {
	base := ex.throughput["baseline"][wl]
	row := fmt.Sprintf("| %s | %s | %.0f", wl, ex.units[wl], mean(base))
	var ntRatio float64
	var perRound []string
	for _, cfg := range []string{"numatrace", "bpftrace", "perf record"} {
		v := ex.throughput[cfg][wl]
		var ratios []float64
		for i := range v {
			if i < len(base) && base[i] > 0 {
				ratios = append(ratios, v[i]/base[i])
			}
		}
		row += fmt.Sprintf(" | %.0f | %.3f", mean(v), median(ratios))
		if cfg == "numatrace" {
			ntRatio = median(ratios)
			for _, r := range ratios {
				perRound = append(perRound, fmt.Sprintf("%.3f", r))
			}
		}
	}
	result := "pass"
	if ntRatio < 0.99 {
		result = "**miss**"
	}
	return fmt.Sprintf("%s | %s | ≥ 0.99 | %s |", row, strings.Join(perRound, ", "), result)
}

// renderRecordingSizes writes the size of numatrace's recording against
// perf's and trace-cmd's.
func (ex *extra) renderRecordingSizes(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("")
	p("## Recording size against perf and trace-cmd")
	p("")
	p("The memcg workload once, recorded system-wide by all three at the same time: `numatrace record` (its whole file: header, every probe's events, kernel snapshots and /proc readings), `perf record -a` and `trace-cmd record` on mm_vmscan_memcg_reclaim_begin and _end only. Stalls are memcg reclaims: one numatrace event each (its report's count), a begin/end pair for the others (counted in their own files).")
	p("")
	p("| recorder | file bytes | stalls in the file | bytes per stall | target |")
	p("|---|--:|--:|--:|---|")
	for _, r := range ex.recSizes {
		if r.why != "" {
			p("| %s | not measured: %s | | | |", r.tool, r.why)
			continue
		}
		per := "—"
		if r.stalls > 0 {
			per = fmt.Sprintf("%.1f", float64(r.bytes)/float64(r.stalls))
		}
		target := ""
		if r.tool == "numatrace record" {
			target = "≤ 12 per stall event (the per-event figure is in Recording below; this one includes the file's fixed parts)"
		}
		p("| %s | %s | %s | %s | %s |", r.tool, thousands(uint64(r.bytes)), thousands(r.stalls), per, target)
	}
}

// renderMemory writes numatrace's memory while it tracks many threads.
func (ex *extra) renderMemory(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("")
	p("## Memory while tracking %s threads", thousands(uint64(ex.rssThreads)))
	p("")
	p("`numatrace attach` system-wide while `bench/threads` starts %s threads that each change CPU once, so the kernel keeps a record for every one of them. VmRSS is read 2 s after they all moved; the peak (VmHWM) includes building the final summary of every thread.", thousands(uint64(ex.rssThreads)))
	p("")
	p("| threads in numatrace's summary | VmRSS while tracking | peak (VmHWM) | target | result |")
	p("|--:|--:|--:|---|---|")
	res := "pass"
	if ex.rssPeakKB > 64<<10 {
		res = "**miss**"
	}
	p("| %s | %.1f MiB | %.1f MiB | ≤ 64 MiB | %s |", thousands(uint64(ex.rssTracked)), float64(ex.rssKB)/1024, float64(ex.rssPeakKB)/1024, res)
}
