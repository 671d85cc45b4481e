// Package testutil holds helpers shared by numatrace's tests.
package testutil

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// InCI reports whether the tests run under CI (CI=true), where a missing
// privilege or kernel feature is a failure rather than a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// RequireRoot skips the test when not root, except in CI, where it fails.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if InCI() {
		t.Fatal("this test needs root and CI=true: run the suite as root")
	}
	t.Skip("needs root (set CI=true to make this a failure)")
}

// RequireFeature skips when the kernel lacks something the test needs,
// with the reason; in CI it fails, since CI's kernel is known to have it.
func RequireFeature(t testing.TB, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	if InCI() {
		t.Fatalf("kernel feature missing in CI: %s", reason)
	}
	t.Skip(reason)
}

// RequireTool is the path of the program name (also looked for in
// /usr/sbin, for a PATH without it), which Debian's package pkg installs.
func RequireTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		p, err = exec.LookPath("/usr/sbin/" + name)
	}
	RequireFeature(t, err == nil, name+" not installed (make deps installs Debian's "+pkg+")")
	return p
}

// OptIn skips a test that runs only when asked for, by a flag or an
// environment variable that why names. Not asking is no failure, in CI
// either: CI asks for the ones it runs (make vmtest gives -vm).
func OptIn(t testing.TB, asked bool, why string) {
	t.Helper()
	if !asked {
		t.Skip(why)
	}
}

// RequireArch skips on a machine other than arch (a GOARCH): the test
// reads that architecture's code and has nothing to check elsewhere, in
// CI too.
func RequireArch(t testing.TB, arch, why string) {
	t.Helper()
	if runtime.GOARCH != arch {
		t.Skipf("%s (this is %s)", why, runtime.GOARCH)
	}
}
