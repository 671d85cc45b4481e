//go:build !linux

package main

import (
	"errors"
	"io"
	"runtime"
)

// Tracing loads BPF programs into the running kernel: Linux only. This
// build replays, reports, exports and runs doctor on copies of a Linux
// machine's /proc and /sys (--root).
var errNeedsLinux = errors.New("tracing needs Linux; this " + runtime.GOOS + " build replays, reports and exports recordings, and runs doctor --root on a copy of a machine's /proc and /sys")

func runAttach([]string, io.Writer, io.Writer) error { return errNeedsLinux }
func runRecord([]string, io.Writer, io.Writer) error { return errNeedsLinux }
func runServe([]string, io.Writer, io.Writer) error  { return errNeedsLinux }
func runProbes([]string, io.Writer) error            { return errNeedsLinux }

// commandAbout is what a command's flags do not say: here, the commands
// that have more to say do not run.
func commandAbout(string) string { return "" }
