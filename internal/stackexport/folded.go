package stackexport

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/sanitize"
)

// kernelSuffix marks a kernel frame, as flamegraph.pl --color=java
// expects, so kernel and user code get different colours.
const kernelSuffix = "_[k]"

// WriteFolded writes samples as folded stacks, one line per distinct
// stack, sorted:
//
//	cause;process;comm;user frames;kernel frames MICROSECONDS
//
// with the frames outermost first. Samples with the same line add up.
func WriteFolded(w io.Writer, samples []aggregate.StackSample) error {
	ns := make(map[string]uint64)
	for i := range samples {
		ns[foldedStack(&samples[i])] += samples[i].Ns
	}
	bw := bufio.NewWriter(w)
	for _, stack := range slices.Sorted(maps.Keys(ns)) {
		fmt.Fprintf(bw, "%s %d\n", stack, micros(ns[stack]))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write folded stacks: %w", err)
	}
	return nil
}

// foldedStack is a sample's line without its value: the root first, the
// innermost kernel frame last.
func foldedStack(s *aggregate.StackSample) string {
	parts := []string{foldedName(s.Cause.String()), foldedName(s.Process), foldedName(s.Comm)}
	var user, kernel int
	if s.Stack != nil {
		user, kernel = len(s.Stack.User), len(s.Stack.Kernel)
		for i := user - 1; i >= 0; i-- {
			parts = append(parts, foldedName(s.Stack.User[i].Name()))
		}
		for i := kernel - 1; i >= 0; i-- {
			parts = append(parts, foldedName(s.Stack.Kernel[i].Name())+kernelSuffix)
		}
	}
	if user+kernel == 0 {
		// A note or "[no stack]": its spaces would end the stack.
		parts = append(parts, foldedName(framelessName(s.Stack)))
	}
	return strings.Join(parts, ";")
}

// foldedName makes name one frame of a folded line: a ';' would split
// it and a space would end the stack early, so both become '_'.
func foldedName(name string) string {
	if name == "" {
		return "[unknown]"
	}
	return strings.Map(func(r rune) rune {
		if r == ';' || unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, sanitize.Text(name))
}

// micros rounds ns to the nearest microsecond, but never a stall's time
// down to nothing.
func micros(ns uint64) uint64 {
	us := ns / 1000
	if ns%1000 >= 500 {
		us++
	}
	if us == 0 && ns > 0 {
		us = 1
	}
	return us
}
