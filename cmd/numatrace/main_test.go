package main

// Unprivileged tests of the command line: every case here fails before
// anything is loaded into the kernel.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/numatrace/numatrace/internal/exporter"
	"github.com/numatrace/numatrace/internal/latency/source"
	runpkg "github.com/numatrace/numatrace/internal/run"
	"github.com/numatrace/numatrace/internal/testutil"
)

// runCLI runs the command in-process and returns its exit code and output.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// oneErrorLine checks that stderr is exactly one "numatrace: ..." line and
// returns it without the prefix.
func oneErrorLine(t *testing.T, stderr string) string {
	t.Helper()
	if !strings.HasSuffix(stderr, "\n") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("stderr %q: want exactly one line", stderr)
	}
	msg, ok := strings.CutPrefix(strings.TrimSuffix(stderr, "\n"), "numatrace: ")
	if !ok {
		t.Fatalf("stderr %q does not start with %q", stderr, "numatrace: ")
	}
	return msg
}

// missingPID is above any pid_max the kernel allows (2^22), and above this
// machine's, so no process has it.
func missingPID(t *testing.T) string {
	t.Helper()
	pid := 1 << 22 * 2
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if max, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && max >= pid {
			t.Fatalf("pid_max %d is above %d", max, pid)
		}
	}
	return strconv.Itoa(pid)
}

func TestRunNoArgsPrintsUsage(t *testing.T) {
	code, stdout, stderr := runCLI()
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if stdout != "" || !strings.Contains(stderr, "usage:") || !strings.Contains(stderr, "numatrace attach") {
		t.Errorf("stdout %q stderr %q", stdout, stderr)
	}
}

func TestRunUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"--pid", "1"}, {"Attach"}, {""}} {
		code, stdout, stderr := runCLI(args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
		if stdout != "" {
			t.Errorf("%q: stdout %q", args, stdout)
		}
		msg := oneErrorLine(t, stderr)
		if !strings.Contains(msg, "unknown command") || !strings.Contains(msg, strconv.Quote(args[0])) {
			t.Errorf("%q: message %q", args, msg)
		}
	}
}

func TestRunVersionAndHelp(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		code, stdout, stderr := runCLI(arg)
		if code != 0 || stdout != "numatrace "+version+"\n" || stderr != "" {
			t.Errorf("%s: exit %d stdout %q stderr %q", arg, code, stdout, stderr)
		}
	}
	for _, arg := range []string{"help", "-h", "--help"} {
		code, stdout, stderr := runCLI(arg)
		if code != 0 || !strings.Contains(stdout, "usage:") || stderr != "" {
			t.Errorf("%s: exit %d stdout %q stderr %q", arg, code, stdout, stderr)
		}
	}
}

func TestAttachHelpExits0(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		code, stdout, stderr := runCLI("attach", arg)
		if code != 0 {
			t.Errorf("attach %s: exit %d, want 0", arg, code)
		}
		if stderr != "" {
			t.Errorf("attach %s: stderr %q", arg, stderr)
		}
		for _, want := range []string{"usage: numatrace attach", "--pid", "--children", "--tid", "--cgroup", "--duration", "--min-event"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("attach %s: help lacks %q", arg, want)
			}
		}
	}
}

func hasTarget(args []string) bool {
	for _, a := range args {
		for _, f := range []string{"--pid", "--tid", "--cgroup"} {
			if a == f || strings.HasPrefix(a, f+"=") {
				return true
			}
		}
	}
	return false
}

// Bad input is exit 2 with one line on stderr and nothing on stdout.
func TestAttachUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want []string // substrings of the message
	}{
		{[]string{"--duration=xyz"}, []string{"attach:", "duration", "xyz"}},
		{[]string{"--duration", "3"}, []string{"attach:", "duration", "(a duration needs a unit: 3s, 3ms)"}},
		{[]string{"--duration", "-1s"}, []string{"--duration must not be negative"}},
		{[]string{"--window", "0"}, []string{"--window must be at least 10ms"}},
		{[]string{"--window=-1s"}, []string{"--window must be at least 10ms"}},
		{[]string{"--window=3ns"}, []string{"--window must be at least 10ms"}},
		{[]string{"--no-such-flag"}, []string{"attach: flag provided but not defined: --no-such-flag"}},
		{[]string{"-p", "0"}, []string{"invalid pid 0", "--pid must be above 0"}},
		{[]string{"-t", "0"}, []string{"invalid tid 0", "--tid must be above 0"}},
		{[]string{"-d", "3"}, []string{"attach: invalid value \"3\" for flag -d", "(a duration needs a unit: 3s, 3ms)"}},
		{[]string{"--window", "x"}, []string{"for flag --window"}},
		{[]string{"--pid", "abc"}, []string{"attach:", "pid", "abc"}},
		{[]string{"--pid"}, []string{"attach:", "pid"}},
		{[]string{"--no-tui", "extra"}, []string{"unexpected argument \"extra\""}},
		{[]string{"--ringbuf-mib", "3"}, []string{"--ringbuf-mib must be a power of two"}},
		{[]string{"--ringbuf-mib", "0"}, []string{"--ringbuf-mib"}},
		{[]string{"--ringbuf-mib", "2048"}, []string{"--ringbuf-mib"}},
		{[]string{"--min-event", "bogus=1s"}, []string{"--min-event", "unknown cause \"bogus\""}},
		{[]string{"--min-event", "x"}, []string{"--min-event", "bad duration"}},
		{[]string{"--pid", "1", "--tid", "1"}, []string{"at most one of --pid, --tid, --cgroup, --pod and --container"}},
		{[]string{"--pid", "1", "--cgroup", "/"}, []string{"at most one of"}},
		{[]string{"--pid=-3"}, []string{"invalid pid -3"}},
		{[]string{"--tid=-3"}, []string{"invalid tid -3"}},
		{[]string{"--pid", "0"}, []string{"invalid pid 0", "--pid must be above 0"}},
		{[]string{"--tid", "0"}, []string{"invalid tid 0", "--tid must be above 0"}},
		{[]string{"--spike-k", "NaN"}, []string{"--spike-k must be a finite number"}},
		{[]string{"--spike-k", "+Inf"}, []string{"--spike-k must be a finite number"}},
		{[]string{"--cgroup", "no/such/numatrace-test.slice"}, []string{"no cgroup at /sys/fs/cgroup/no/such/numatrace-test.slice", "not found"}},
		{[]string{"--causes", "memcg_reclaim,bogus"}, []string{"--causes: no probe or cause \"bogus\"", "probes: direct_reclaim"}},
		{[]string{"--no-causes", "thread_exit"}, []string{"--no-causes: no probe or cause \"thread_exit\""}},
		{[]string{"--causes", "mmap_lock", "--no-causes", "compaction"}, []string{"--causes or --no-causes, not both"}},
		{[]string{"--mmap-lock-via", "kprobe"}, []string{"--mmap-lock-via must be auto, contention or tracepoints"}},
		{[]string{"--children", "--tid", "5"}, []string{"attach: --children (-f) follows the descendants of a --pid process: give --pid"}},
		{[]string{"-f", "--cgroup", "/"}, []string{"--children (-f) follows the descendants of a --pid process"}},
	}
	pid := missingPID(t)
	for _, c := range cases {
		args := append([]string{"attach"}, c.args...)
		if !hasTarget(c.args) {
			// Should the checked error ever stop firing, the missing pid
			// still ends the run before anything is loaded or traced.
			args = append([]string{"attach", "--pid", pid}, c.args...)
		}
		code, stdout, stderr := runCLI(args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, stderr)
			continue
		}
		if stdout != "" {
			t.Errorf("%q: stdout %q", args, stdout)
		}
		msg := oneErrorLine(t, stderr)
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q: message %q lacks %q", args, msg, w)
			}
		}
	}
}

func TestAttachMissingPID(t *testing.T) {
	pid := missingPID(t)
	for _, flag := range []string{"--pid", "--tid"} {
		code, stdout, stderr := runCLI("attach", "--no-tui", flag, pid)
		if code != 2 {
			t.Errorf("%s %s: exit %d, want 2", flag, pid, code)
		}
		if stdout != "" {
			t.Errorf("stdout %q", stdout)
		}
		msg := oneErrorLine(t, stderr)
		if !strings.Contains(msg, pid) || !strings.Contains(msg, "not found") {
			t.Errorf("%s: message %q should name pid %s and say not found", flag, msg, pid)
		}
	}
}

// A kernel thread is no target: `attach --pid 2` (kthreadd) used to run
// and end with "No stalls or migrations recorded", exit 0.
func TestAttachKernelThread(t *testing.T) {
	stat, err := os.ReadFile("/proc/2/stat")
	testutil.RequireFeature(t, err == nil && strings.Contains(string(stat), "(kthreadd)"), "pid 2 is not kthreadd here")
	code, stdout, stderr := runCLI("attach", "--no-tui", "--duration", "1s", "--pid", "2")
	if code != 2 || stdout != "" {
		t.Fatalf("exit %d, stdout %q, want 2 and nothing", code, stdout)
	}
	if msg := oneErrorLine(t, stderr); !strings.Contains(msg, "pid 2 (kthreadd) is a kernel thread") {
		t.Errorf("message %q", msg)
	}
}

// A thread id given as --pid is rejected with the right suggestion.
func TestAttachPidOfAThread(t *testing.T) {
	// A thread of its own for a goroutine, so that the process has one
	// besides its main thread whatever the runtime keeps.
	pinned, done := make(chan struct{}), make(chan struct{})
	defer close(done)
	go func() {
		runtime.LockOSThread()
		close(pinned)
		<-done
	}()
	<-pinned
	tids, err := os.ReadDir("/proc/self/task")
	testutil.RequireFeature(t, err == nil, fmt.Sprintf("no /proc/self/task: %v", err))
	pid := os.Getpid()
	other := 0
	for _, d := range tids {
		if n, err := strconv.Atoi(d.Name()); err == nil && n != pid {
			other = n
			break
		}
	}
	if other == 0 {
		t.Fatalf("no thread of the test process but %d in /proc/self/task", pid)
	}
	code, _, stderr := runCLI("attach", "--no-tui", "--pid", strconv.Itoa(other))
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	msg := oneErrorLine(t, stderr)
	want := strconv.Itoa(other) + " is a thread of process " + strconv.Itoa(pid)
	if !strings.HasPrefix(msg, want) {
		t.Errorf("message %q, want prefix %q", msg, want)
	}
}

func TestExitErrorUnwraps(t *testing.T) {
	err := usageErr("bad %s", "thing")
	ee, ok := err.(*exitError)
	if !ok || ee.code != 2 || err.Error() != "bad thing" || ee.Unwrap() == nil {
		t.Errorf("usageErr = %#v", err)
	}
}

// replay and report run in-process here exactly as a darwin or arm64
// build runs them (`make cross` builds those): no BPF, no Linux calls.
func TestReplayShippedRecordingAnywhere(t *testing.T) {
	rec := "../../testdata/recordings/vm-6.1-misplaced.ntr"
	code, replayed, stderr := runCLI("replay", "--fast", "--no-tui", rec)
	if code != 0 || stderr != "" {
		t.Fatalf("replay: exit %d, stderr %q", code, stderr)
	}
	code, reported, stderr := runCLI("report", rec)
	if code != 0 || stderr != "" {
		t.Fatalf("report: exit %d, stderr %q", code, stderr)
	}
	if replayed != reported || !strings.Contains(replayed, "numa_migration") || !strings.Contains(replayed, "PROCESSES") {
		t.Errorf("replay and report differ, or show no NUMA migration:\n%s\n---\n%s", replayed, reported)
	}
}

// A speed that is not a finite positive number is one line and exit 2.
func TestReplayBadSpeed(t *testing.T) {
	rec := "../../testdata/recordings/vm-6.1-misplaced.ntr"
	for _, speed := range []string{"NaN", "Inf", "-1", "0"} {
		code, stdout, stderr := runCLI("replay", "--no-tui", "--speed", speed, rec)
		if code != 2 || stdout != "" {
			t.Errorf("--speed %s: exit %d, stdout %q; want 2 and nothing", speed, code, stdout)
			continue
		}
		if msg := oneErrorLine(t, stderr); !strings.Contains(msg, "--speed") {
			t.Errorf("--speed %s: message %q does not name the flag", speed, msg)
		}
	}
}

// export -o does not write through a link planted at the path.
func TestExportRefusesASymlinkedOutput(t *testing.T) {
	out, untouched := plantedLink(t, "trace.json")
	code, _, stderr := runCLI("export", "--format", "perfetto", "../../testdata/recordings/vm-6.1-misplaced.ntr", "-o", out)
	if msg := oneErrorLine(t, stderr); code == 0 || !strings.Contains(msg, "symbolic link") {
		t.Errorf("exit %d, message %q: want a failure saying the path is a symbolic link", code, msg)
	}
	untouched()
}

// plantedLink makes name, in a directory of its own, a symbolic link to a
// file holding "precious", as an attacker would plant it at an output
// path; untouched fails the test if the file was written through it.
func plantedLink(t *testing.T, name string) (link string, untouched func()) {
	t.Helper()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	link = filepath.Join(dir, name)
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	return link, func() {
		t.Helper()
		if b, _ := os.ReadFile(victim); string(b) != "precious" {
			t.Fatalf("the link's target now holds %.40q", b)
		}
	}
}

// record -o and attach --record leave an existing recording alone unless
// --force: one line, exit 2, the file as it was.
func TestRecordRefusesToOverwrite(t *testing.T) {
	pid := missingPID(t)
	for _, cmd := range [][]string{{"record", "-o"}, {"attach", "--no-tui", "--record"}} {
		path := filepath.Join(t.TempDir(), "incident.ntr")
		if err := os.WriteFile(path, []byte("an earlier recording"), 0o600); err != nil {
			t.Fatal(err)
		}
		args := append(append([]string{}, cmd...), path, "--pid", pid)
		code, stdout, stderr := runCLI(args...)
		if code != 2 || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q; want 2 and nothing", args, code, stdout)
		}
		msg := oneErrorLine(t, stderr)
		if !strings.Contains(msg, path+" already exists (20 bytes): not overwritten; give --force") {
			t.Errorf("%q: message %q", args, msg)
		}
		if b, _ := os.ReadFile(path); string(b) != "an earlier recording" {
			t.Errorf("%q: the file now holds %q", args, b)
		}
		// With --force the check passes and the run goes on to the
		// target, which does not exist.
		code, _, stderr = runCLI(append(args, "--force")...)
		if msg := oneErrorLine(t, stderr); code != 2 || !strings.Contains(msg, "not found") {
			t.Errorf("%q --force: exit %d, message %q; want the missing pid", args, code, msg)
		}
	}
}

// The short flags tracing tools use reach the same settings as the long
// ones: -p is --pid, -t --tid, -d --duration.
func TestAttachShortFlags(t *testing.T) {
	pid := missingPID(t)
	for args, want := range map[string]string{"-p " + pid: "no process with pid " + pid, "-t " + pid: "no thread with tid " + pid,
		"-p " + pid + " -d 1s": "no process with pid " + pid} {
		code, stdout, stderr := runCLI(append([]string{"attach", "--no-tui"}, strings.Fields(args)...)...)
		if msg := oneErrorLine(t, stderr); code != 2 || stdout != "" || msg != want+": not found" {
			t.Errorf("%q: exit %d, stdout %q, message %q; want the missing pid", args, code, stdout, msg)
		}
	}
}

// Each command's help is the same from `numatrace help CMD` and
// `numatrace CMD --help`, and lists every flag with two dashes under a
// heading, within 100 columns.
func TestCommandHelp(t *testing.T) {
	for _, name := range []string{"attach", "record", "serve", "replay", "report", "export", "doctor", "probes"} {
		code, stdout, stderr := runCLI("help", name)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "usage: numatrace "+name+" ") {
			t.Errorf("help %s: exit %d, stderr %q, stdout starts %.60q", name, code, stderr, stdout)
			continue
		}
		if _, again, _ := runCLI(name, "--help"); again != stdout {
			t.Errorf("%s --help differs from help %s", name, name)
		}
		if strings.Contains(stdout, "\nother:\n") {
			t.Errorf("help %s has flags under no heading:\n%s", name, stdout)
		}
		for _, line := range strings.Split(stdout, "\n") {
			if len(line) > 100 {
				t.Errorf("help %s: a line of %d columns: %q", name, len(line), line)
			}
			if flag, ok := strings.CutPrefix(line, "  -"); ok && !strings.HasPrefix(flag, "-") && !strings.HasPrefix(flag[1:], ", --") {
				t.Errorf("help %s: %q is not spelled --flag or -x, --flag", name, line)
			}
		}
	}
}

// serve's help names the label value cgroups past --cgroup-limit fold
// into as the metrics and their help do.
func TestServeHelpNamesTheOverflowLabel(t *testing.T) {
	_, help, _ := runCLI("serve", "--help")
	if !strings.Contains(help, strconv.Quote(exporter.Overflow)) || strings.Contains(help, `"other"`) {
		t.Errorf("serve --help does not name the label value %q:\n%s", exporter.Overflow, help)
	}
}

// attach's help goes by purpose, target first, and a flag's help that
// continues another's follows it: --spike-k's "..." is ended by
// --spike-floor's "...and above this floor" (alphabetically, before it).
func TestAttachHelpGroupsByPurpose(t *testing.T) {
	_, help, _ := runCLI("attach", "--help")
	order := []string{"\ntarget (", "  -p, --pid PID\n", "  -f, --children\n", "  -t, --tid TID\n", "  --pod POD\n",
		"  -d, --duration DURATION\n", "\nlatency (", "  --latency-prom URL\n", "  --latency-metric NAME\n",
		"  --slo DURATION\n", "  --spike-k X\n", "  --spike-floor DURATION\n        ...and above this floor",
		"\noutput:\n", "  -o, --record FILE\n", "  --force\n", "\ntuning:\n", "  --window DURATION\n"}
	at := 0
	for _, want := range order {
		i := strings.Index(help[at:], want)
		if i < 0 {
			t.Fatalf("attach --help lacks %q after byte %d:\n%s", want, at, help)
		}
		at += i + len(want)
	}
}

// The usage shows the headline feature: the latency flags, --slo, and
// the targets a pod or a container are.
func TestUsageShowsLatencyAndTargets(t *testing.T) {
	_, usage, _ := runCLI("help")
	for _, want := range []string{"-p, --pid PID", "-t, --tid TID", "--pod", "--container", "--latency kernel|off",
		"--latency-file FILE", "--latency-prom URL", "--latency-uprobe", "--slo DURATION", "numatrace help COMMAND", "--force"} {
		if !strings.Contains(usage, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	for _, line := range strings.Split(usage, "\n") {
		if len(line) > 100 {
			t.Errorf("a usage line of %d columns: %q", len(line), line)
		}
	}
	code, _, stderr := runCLI("help", "bogus")
	if msg := oneErrorLine(t, stderr); code != 2 || !strings.Contains(msg, `help: unknown command "bogus"`) {
		t.Errorf("help bogus: exit %d, message %q", code, msg)
	}
}

// Every kind of latency source is in the help: its flag under the
// latency heading of attach and record (help.go's latencyGroup), in the
// usage, and in the README.
func TestHelpNamesEveryLatencySource(t *testing.T) {
	_, usage, _ := runCLI("help")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range runpkg.LatencyKinds() {
		f := source.Flag(k)
		name, _, _ := strings.Cut(strings.TrimPrefix(f, "--"), " ")
		if f == "" || !slices.Contains(latencyGroup.names, name) {
			t.Errorf("%s: its flag %q is not under the latency heading (latencyGroup, help.go)", k, f)
		}
		if !strings.Contains(usage, f) {
			t.Errorf("%s: the usage (main.go) does not show %s", k, f)
		}
		if !strings.Contains(string(readme), f) {
			t.Errorf("%s: README.md does not show %s", k, f)
		}
	}
}

// cutRecording is the first n bytes of a shipped recording.
func cutRecording(t *testing.T, n int) string {
	t.Helper()
	full, err := os.ReadFile("../../testdata/recordings/redis-memcg-hog.ntr")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cut.ntr")
	if err := os.WriteFile(path, full[:n], 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A recording cut before it traced anything is no report "for 0s" with
// exit 0: one line saying where it was cut, exit 2.
func TestReportCutBeforeAnyTracing(t *testing.T) {
	for _, n := range []int{3000, 6000} {
		path := cutRecording(t, n)
		code, stdout, stderr := runCLI("report", path)
		if code != 2 || stdout != "" {
			t.Errorf("cut at %d: exit %d, stdout %.80q; want 2 and nothing", n, code, stdout)
		}
		want := path + " is truncated at byte " + strconv.Itoa(n) + ", before any tracing was recorded: nothing to report"
		if msg := oneErrorLine(t, stderr); msg != want {
			t.Errorf("cut at %d: message %q, want %q", n, msg, want)
		}
	}
}

// A recording cut after some tracing reports what was read, and says in
// one WARNING line where the file is cut.
func TestReportCutRecordingWarns(t *testing.T) {
	path := cutRecording(t, 10000)
	code, stdout, stderr := runCLI("report", path)
	if code != 0 || !strings.Contains(stdout, "for 20.003s") {
		t.Errorf("exit %d, report %.120q; want 0 and the first 20 s", code, stdout)
	}
	want := "WARNING: " + path + " is truncated: cut short at byte 10000, inside a block; 3 complete block(s) read before it"
	if msg := oneErrorLine(t, stderr); msg != want {
		t.Errorf("stderr %q, want one line %q", msg, want)
	}
}

// A directory named as a recording is said to be one.
func TestReportADirectory(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCLI("report", dir)
	if msg := oneErrorLine(t, stderr); code != 2 || stdout != "" || msg != dir+" is a directory, not a recording" {
		t.Errorf("exit %d, stdout %q, message %q", code, stdout, msg)
	}
}

// numatrace probes on this kernel fits 100 columns (its table reached 259).
func TestProbesFits100Columns(t *testing.T) {
	testutil.RequireRoot(t)
	code, stdout, stderr := runCLI("probes")
	if code != 0 || !strings.Contains(stdout, "direct_reclaim") {
		t.Fatalf("probes: exit %d, stderr %q", code, stderr)
	}
	for _, line := range strings.Split(stdout, "\n") {
		if w := len([]rune(line)); w > 100 {
			t.Errorf("a line of %d columns: %q", w, line)
		}
	}
}

// serve's stall profile is the past N seconds, sent at once, where Go's
// /debug/pprof/profile?seconds=N records the next N: its help says which,
// and so does the README's Serve section.
func TestServeSaysTheStallProfileIsThePast(t *testing.T) {
	_, help, _ := runCLI("serve", "--help")
	usage, _, _ := strings.Cut(help, "\nserving:")
	flat := strings.Join(strings.Fields(usage), " ")
	for _, want := range []string{"/debug/pprof/stalls?seconds=N", "the past N seconds, sent at once", "records the next N seconds instead"} {
		if !strings.Contains(flat, want) {
			t.Errorf("serve --help does not say %q:\n%s", want, usage)
		}
	}
	usage, _ = readmeSection(t, "Usage")
	_, serve, _ := strings.Cut(usage, "### Serve")
	serve, _, _ = strings.Cut(serve, "\n### ")
	flat = strings.Join(strings.Fields(serve), " ")
	for _, want := range []string{"is the stall profile of the past N seconds, sent at once", "waits and records the next N seconds instead"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the README's Serve section does not say %q:\n%s", want, serve)
		}
	}
}
