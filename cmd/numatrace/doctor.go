package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/numatrace/numatrace/internal/doctor"
)

func runDoctor(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	pid := fs.Int("pid", 0, "also check this process's placement and memory cgroup, and show its memory per node")
	alias(fs, "p", "pid")
	asJSON := fs.Bool("json", false, "print the findings as one JSON object")
	onlyNumastat := fs.Bool("numastat", false, "with --pid: print only the per-node memory table (numastat -p)")
	interval := fs.Duration("interval", time.Second, "read growing counters (compact_stall, numastat, CPU time) twice, this far apart; 0 reads once")
	root := fs.String("root", "/", "where /proc and /sys are (a copy of another machine's, for offline checks)")
	later := fs.String("root-later", "", "with --root: a second copy of the same machine taken seconds later, for the rates (their /proc/uptime tells how far apart)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	copied := !doctor.LiveProc(*root) // a copy, not a mounted procfs (/host/proc in a container is live)
	switch {
	case *later != "" && !copied:
		return usageErr("doctor: --root-later needs --root (the earlier copy)")
	case copied && *later == "" && set["interval"] && *interval > 0:
		return usageErr("doctor: a copy holds one reading, so --interval cannot measure it: give --root-later DIR, a copy taken later")
	case copied && !set["interval"]:
		// A copy is read as it is: rates come only from --root-later.
		*interval = 0
	}
	if *onlyNumastat && *pid == 0 {
		return usageErr("doctor: --numastat needs --pid")
	}
	if *pid < 0 || *interval < 0 {
		return usageErr("doctor: --pid and --interval must not be negative")
	}
	rep, err := doctor.Run(doctor.Options{Root: *root, Later: *later, PID: *pid, Interval: *interval})
	if errors.Is(err, doctor.ErrNoProcess) {
		return &exitError{code: 2, err: err}
	}
	if err != nil {
		return err
	}
	switch {
	case *asJSON && *onlyNumastat:
		return json.NewEncoder(stdout).Encode(rep.Numastat)
	case *asJSON:
		return json.NewEncoder(stdout).Encode(rep)
	case *onlyNumastat:
		rep.Numastat.Write(stdout, rep.PID, rep.Comm)
	default:
		rep.Text(stdout)
	}
	if rep.Worst() == doctor.Crit {
		fmt.Fprintln(stderr, "numatrace: doctor found critical misconfigurations")
	}
	return nil
}
