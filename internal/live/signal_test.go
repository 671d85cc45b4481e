//go:build linux

package live

import (
	"syscall"
	"testing"
	"time"
)

// A hang-up ends the run's context, and the SIGHUPs that follow (the
// shell passes its own on) are caught until the run is over instead of
// killing it while it closes the recording: one would end this test
// binary.
func TestRunContextEndsOnSIGHUPAndKeepsCatchingIt(t *testing.T) {
	ctx, cancel := runContext(0)
	defer cancel()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGHUP did not end the run's context")
	}
	time.Sleep(100 * time.Millisecond) // the run winds down
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // still here: caught
}
