package doctor_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/numatrace/numatrace/internal/doctor"
	"github.com/numatrace/numatrace/internal/doctor/doctortest"
)

// run reads fixture machine name twice, a second apart, with pid 4242.
func run(t *testing.T, name string) *doctor.Report {
	t.Helper()
	root, later := doctortest.Machine(t, name)
	r, err := doctor.Run(doctor.Options{Root: root, Later: later, PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func find(r *doctor.Report, check string) *doctor.Finding {
	for i := range r.Findings {
		if r.Findings[i].Check == check {
			return &r.Findings[i]
		}
	}
	return nil
}

func complete(t *testing.T, f *doctor.Finding) {
	t.Helper()
	if f.Title == "" || len(f.Evidence) == 0 || f.Why == "" || f.TradeOff == "" || (f.Severity > doctor.Info && (f.Fix == "" || f.Persist == "")) {
		t.Errorf("incomplete finding: %+v", f)
	}
}

func TestHealthyMachineHasNothingAboveInfo(t *testing.T) {
	r := run(t, "")
	for _, f := range r.Findings {
		// A 128 GB machine at the default watermark_scale_factor: seed
		// 000 would raise it, but nothing stalls, so it is information.
		if f.Check != "watermark_scale_factor" || f.Severity != doctor.Info {
			t.Errorf("finding on a healthy machine: [%s] %s: %s", f.Check, f.Severity, f.Title)
		}
	}
	if len(r.Skipped) != 0 {
		t.Errorf("checks skipped on a complete machine: %v", r.Skipped)
	}
	if r.Interval != "1s" {
		t.Errorf("interval %q, want the copies' uptime difference, 1s", r.Interval)
	}
}

// Every incident of the seed reports, on a machine laid out as the report
// describes it, is named by its check, with the report's figures as
// evidence and the report's fix; and no check contradicts it.
func TestSeedIncidents(t *testing.T) {
	type want struct {
		check    string
		severity doctor.Severity
		evidence string // a value the finding must quote
		fix      string // a part of its fix
	}
	cases := []struct {
		machine string
		want    []want
		never   []string // checks that must stay silent (advice the seed contradicts)
	}{
		{"seed000_zone_reclaim", []want{{"zone_reclaim_mode", doctor.Crit, "zone_reclaim_failed growth over 1s = 9", "sysctl -w vm.zone_reclaim_mode=0"}}, nil},
		{"seed000_thp_always", []want{{"thp_defrag", doctor.Crit, "compact_stall growth over 1s = 12", "madvise > /sys/kernel/mm/transparent_hugepage/defrag"}}, nil},
		// The fix for a saturated bound node keeps NUMA balancing on.
		{"seed000_saturated_node", []want{{"node_saturation", doctor.Warn, "31.50 CPUs", "taskset -a -p -c 0-63 4242"}}, []string{"numa_balancing"}},
		{"seed000_hugetlb_starves", []want{{"hugepage_starvation", doctor.Crit, "oom_kill growth over 1s = 1", "every pool page is mapped or reserved"}}, []string{"hugepage_reservation"}},
		{"seed000_hugetlb_psi", []want{{"hugepage_starvation", doctor.Warn, "nr_hugepages 10240, free_hugepages 1536, resv_hugepages 512", "sysctl -w vm.nr_hugepages=9216"}}, []string{"hugepage_reservation"}},
		{"seed000_hugetlb_unused", []want{{"hugepage_reservation", doctor.Crit, "nr_hugepages 8192, free_hugepages 6144, resv_hugepages 0", "sysctl -w vm.nr_hugepages=2048"}}, []string{"hugepage_starvation"}},
		{"seed000_interleave_fits", []want{{"interleave", doctor.Warn, "interleave:0-1", "--cpunodebind=0 --membind=0"}}, []string{"remote_memory"}},
		{"seed000_membind_mismatch", []want{{"binding", doctor.Crit, "bind:1", "--cpunodebind=0 --membind=0"}}, []string{"remote_memory"}},
		{"seed000_pod_zone_reclaim", []want{
			{"zone_reclaim_mode", doctor.Warn, "zone_reclaim_mode = 1", "on the node (host), not from this container: sysctl -w vm.zone_reclaim_mode=0"},
			{"container", doctor.Info, "private cgroup namespace", ""}}, nil},
		{"seed000_container_v1", []want{{"container", doctor.Info, "/docker/4f2a9c", ""}}, nil},
		{"nic_irqs_unbound_moved", []want{{"nic_irq_affinity", doctor.Info, "/proc/irq/127/effective_affinity_list = 23 (node 1)", ""}}, nil},
		{"seed000_nic_irqs", []want{{"nic_irq_affinity", doctor.Warn, "/proc/irq/127/effective_affinity_list = 23 (node 1)", "for i in 121 122 123 124 125 126 127; do echo 0-15,32-47"}}, nil},
		{"seed000_pod_cpu_only", []want{{"remote_memory", doctor.Warn, "remote share of accesses (estimate) = 70%", "topologyManagerPolicy: single-numa-node"}}, []string{"numa_balancing"}},
		{"seed000_tuning", []want{
			{"watermark_scale_factor", doctor.Warn, "allocstall_* growth over 1s = 35", "sysctl -w vm.watermark_scale_factor=100"},
			{"min_free_kbytes", doctor.Warn, "min_free_kbytes = 16384", "sysctl -w vm.min_free_kbytes=91"}}, nil},
		{"seed001_mysql_unbound", []want{
			{"cross_node_alloc", doctor.Crit, "numa_miss share 39.0%", "numatrace doctor --pid"},
			{"remote_memory", doctor.Warn, "remote share of accesses (estimate) = 50%", "taskset -a -p -c 0-15,32-47 4242 && migratepages 4242 1 0"}}, nil},
		{"seed001_membind_oom", []want{{"node_pressure", doctor.Crit, "numa_maps policy = bind:0", "on a node with room (node 1)"}}, nil},
		{"seed002_jvm_unbound", []want{
			{"numa_balancing_thrash", doctor.Warn, "numa_pages_migrated 6100/s", "then sysctl -w kernel.numa_balancing=0"},
			{"remote_memory", doctor.Warn, "numa_balancing = 1", "migratepages 4242 1 0"}}, nil},
		// Seed 002: numa_balancing=0 alone is no cure for a CPU-only binding.
		{"seed002_cpu_only", []want{{"remote_memory", doctor.Warn, "remote share of accesses (estimate) = 41%", "migratepages 4242 1 0"}}, []string{"numa_balancing"}},
		{"seed003_job_68_local", []want{{"remote_memory", doctor.Warn, "remote share of accesses (estimate) = 32%", "migratepages 4242 1 0"}}, nil},
		{"seed004_node0_exhausted", []want{
			{"node_pressure", doctor.Warn, "node 0 numa_foreign 4500/s", "numatrace doctor --pid"},
			{"cross_node_alloc", doctor.Warn, "numa_miss share 12.0%", ""},
			{"remote_memory", doctor.Warn, "process memory 61440 MiB", "numactl --interleave=all"}}, nil},
		// Interleaved pages on the other node are not allocation mistakes.
		{"seed004_interleaved", []want{{"interleave", doctor.Info, "interleave:0-1", ""}}, []string{"remote_memory", "cross_node_alloc"}},
	}
	for _, c := range cases {
		t.Run(c.machine, func(t *testing.T) {
			r := run(t, c.machine)
			for _, w := range c.want {
				f := find(r, w.check)
				if f == nil {
					t.Errorf("%s did not fire; findings: %v", w.check, titles(r))
					continue
				}
				if f.Severity != w.severity {
					t.Errorf("%s: severity %s, want %s", w.check, f.Severity, w.severity)
				}
				if !strings.Contains(strings.Join(f.Evidence, "\n"), w.evidence) {
					t.Errorf("%s: evidence lacks %q:\n%s", w.check, w.evidence, strings.Join(f.Evidence, "\n"))
				}
				if !strings.Contains(f.Fix, w.fix) {
					t.Errorf("%s: fix %q lacks %q", w.check, f.Fix, w.fix)
				}
				complete(t, f)
			}
			for _, check := range c.never {
				if f := find(r, check); f != nil {
					t.Errorf("%s fired, against the seed's advice: %s (fix %q)", check, f.Title, f.Fix)
				}
			}
		})
	}
}

func titles(r *doctor.Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, "["+f.Check+"] "+f.Title)
	}
	return out
}

// Each check fires on one machine and stays silent on a near miss.
func TestEachCheckFiresAndStaysQuiet(t *testing.T) {
	cases := map[string][2]string{ // check → machine it fires on, near miss
		"zone_reclaim_mode":      {"seed000_zone_reclaim", "ok_zone_reclaim_one_node"},
		"thp_defrag":             {"seed000_thp_always", "ok_thp_defer"},
		"cross_node_alloc":       {"seed001_mysql_unbound", "ok_cross_node_quiet"},
		"remote_memory":          {"seed002_cpu_only", "ok_remote_5pct"},
		"binding":                {"seed000_membind_mismatch", "seed002_cpu_only"},
		"node_saturation":        {"seed000_saturated_node", "bound_balancing_on"},
		"numa_balancing":         {"bound_balancing_on", "seed000_saturated_node"},
		"numa_balancing_thrash":  {"seed002_jvm_unbound", "ok_thrash_settling"},
		"interleave":             {"seed000_interleave_fits", "seed001_mysql_unbound"},
		"node_pressure":          {"seed004_node0_exhausted", "ok_node_pressure_dma32"},
		"hugepage_reservation":   {"seed000_hugetlb_unused", "ok_hugetlb_reserved"},
		"hugepage_starvation":    {"seed000_hugetlb_starves", "ok_hugetlb_reserved"},
		"watermark_scale_factor": {"seed000_tuning", "ok_min_free_large"},
		"min_free_kbytes":        {"seed000_tuning", "ok_min_free_default"},
		"nic_irq_affinity":       {"seed000_nic_irqs", "ok_irqs_spread_unbound"},
		"container":              {"seed000_pod_zone_reclaim", "ok_container_v1_host"},
		"psi_memory":             {"psi_pressure", ""},
		"memory_cgroup":          {"memcg_v1_at_limit", "ok_memcg_roomy"},
	}
	for _, check := range doctor.Checks() {
		c, ok := cases[check]
		if !ok {
			t.Errorf("check %s has no fixture machines", check)
			continue
		}
		t.Run(check, func(t *testing.T) {
			f := find(run(t, c[0]), check)
			if f == nil {
				t.Fatalf("did not fire on %s", c[0])
			}
			complete(t, f)
			if q := find(run(t, c[1]), check); q != nil {
				t.Errorf("fired on the near miss %s: %s", c[1], q.Title)
			}
		})
	}
}

// Rates need two readings: a copy read once says so instead of "0".
func TestOneReadingMeasuresNoRate(t *testing.T) {
	root, later := doctortest.Machine(t, "seed000_thp_always")
	once, err := doctor.Run(doctor.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	f := find(once, "thp_defrag")
	if f == nil || f.Severity != doctor.Warn || !strings.Contains(strings.Join(f.Evidence, "\n"), "compact_stall growth = not measured") {
		t.Fatalf("one reading: %+v", f)
	}
	if once.Interval != "not measured" {
		t.Errorf("interval %q", once.Interval)
	}
	// Asked to wait and read a copy again, the library measures nothing.
	if r, err := doctor.Run(doctor.Options{Root: root, Interval: time.Hour}); err != nil || r.Interval != "not measured" {
		t.Errorf("a copy read twice: %v %+v", err, r)
	}
	js, _ := json.Marshal(once)
	if regexp.MustCompile(`growth[^"]*= 0"`).Match(js) {
		t.Errorf("a growth reported as measured from one reading: %s", js)
	}
	// One zoneinfo snapshot below low is information: pressure is measured.
	full, _ := doctortest.Machine(t, "seed004_node0_exhausted")
	if r, err := doctor.Run(doctor.Options{Root: full}); err != nil || find(r, "node_pressure") == nil || find(r, "node_pressure").Severity != doctor.Info {
		t.Errorf("node pressure from one reading: %v %v", err, titles(r))
	}
	jvm, _ := doctortest.Machine(t, "seed002_jvm_unbound")
	if r, err := doctor.Run(doctor.Options{Root: jvm}); err != nil || find(r, "numa_balancing_thrash") != nil ||
		!strings.Contains(strings.Join(r.Skipped, "\n"), "numa_balancing_thrash: hint-fault and migration rates not measured") {
		t.Errorf("balancing churn from one reading: %v, %+v", err, r)
	}
	// Without uptime in the copies, the interval must be given.
	os.Remove(filepath.Join(later, "proc/uptime"))
	if _, err := doctor.Run(doctor.Options{Root: root, Later: later}); err == nil || !strings.Contains(err.Error(), "--interval") {
		t.Errorf("copies without uptime: %v", err)
	}
	r, err := doctor.Run(doctor.Options{Root: root, Later: later, Interval: 2 * time.Second})
	if err != nil || r.Interval != "2s" || !strings.Contains(strings.Join(find(r, "thp_defrag").Evidence, "\n"), "compact_stall growth over 2s = 12") {
		t.Errorf("copies 2s apart: %v %+v", err, r)
	}
}

// A live machine read twice: the counters that grow are read again.
func TestLiveSecondReading(t *testing.T) {
	root, later := doctortest.Machine(t, "seed000_thp_always")
	r, err := doctor.Run(doctor.Options{Root: root, Interval: time.Second, Sleep: func(time.Duration) {
		for _, f := range []string{"proc/vmstat", "proc/uptime"} {
			b, _ := os.ReadFile(filepath.Join(later, f))
			os.WriteFile(filepath.Join(root, f), b, 0o644)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if f := find(r, "thp_defrag"); f == nil || f.Severity != doctor.Crit {
		t.Fatalf("growing compact_stall not critical: %+v", f)
	}
}

func TestOutputShapes(t *testing.T) {
	r := run(t, "ok_min_free_large")
	if len(r.Findings) != 0 {
		t.Fatalf("findings: %v", titles(r))
	}
	js, _ := json.Marshal(r)
	if !strings.Contains(string(js), `"findings":[]`) {
		t.Errorf("no findings must be a list: %s", js)
	}
	r = run(t, "seed000_membind_mismatch")
	all, _ := json.Marshal(r)
	if regexp.MustCompile(`\[\d+ \d+`).Match(all) {
		t.Errorf("a CPU or node list printed as a Go slice: %s", all)
	}
	if !strings.Contains(string(all), "Cpus_allowed_list = 0-15,32-47") {
		t.Errorf("CPU list not as ranges: %s", all)
	}
}

// numastat -p's remote share is about where the threads run: for an
// unbound process it is not 0 by definition.
func TestNumastatUnbound(t *testing.T) {
	r := run(t, "seed001_mysql_unbound")
	ns := r.Numastat
	if ns == nil || ns.Remote == nil || *ns.Remote < 0.49 || *ns.Remote > 0.51 {
		t.Fatalf("remote share %+v, want about 50%% (threads half on each node, memory 55/45)", ns)
	}
	var b strings.Builder
	ns.Write(&b, r.PID, r.Comm)
	for _, want := range []string{"Node 0", "Node 1", "Threads' CPU time: node 0 50%, node 1 50% (CPUs allowed on node(s) 0-1)", "Remote accesses, estimated: 50.0%"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestMissingPIDAndMissingFiles(t *testing.T) {
	root, _ := doctortest.Machine(t, "")
	if _, err := doctor.Run(doctor.Options{Root: root, PID: 999}); !errors.Is(err, doctor.ErrNoProcess) {
		t.Errorf("missing pid: %v", err)
	}
	// A kernel without PSI or THP: the checks say why they did not run.
	os.RemoveAll(filepath.Join(root, "proc/pressure"))
	os.RemoveAll(filepath.Join(root, "sys/kernel/mm/transparent_hugepage"))
	r, err := doctor.Run(doctor.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(r.Skipped, "\n")
	for _, want := range []string{"psi_memory: /proc/pressure/memory not readable", "thp_defrag: no transparent huge pages"} {
		if !strings.Contains(got, want) {
			t.Errorf("skipped lacks %q: %v", want, r.Skipped)
		}
	}
	if _, err := doctor.Run(doctor.Options{Root: t.TempDir()}); err == nil {
		t.Error("an empty root gave no error")
	}
}

// This machine, as it is configured: doctor must report nothing above
// info on a clean machine. Memory pressure (PSI) is a measurement of the
// moment, not configuration: in make test it reflects the memcg tests that
// ran seconds before, so it is logged, not judged.
func TestThisMachineIsClean(t *testing.T) {
	r, err := doctor.Run(doctor.Options{Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Findings {
		switch {
		case f.Check == "psi_memory":
			t.Logf("memory pressure now: [%s] %s", f.Severity, f.Title)
		case f.Severity > doctor.Info:
			t.Errorf("doctor reports above info on this machine: [%s] %s", f.Check, f.Title)
		}
	}
}

// docs/DOCTOR.md maps every incident of the five seed reports to a check:
// each seed is there, each check is there, and each named check exists.
func TestSeedTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/DOCTOR.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, seed := range []string{"000", "001", "002", "003", "004"} {
		if !regexp.MustCompile(`(?m)^\| ` + seed + ` `).MatchString(doc) {
			t.Errorf("seed %s has no row", seed)
		}
	}
	known := map[string]bool{}
	for _, c := range doctor.Checks() {
		known[c] = true
		if !strings.Contains(doc, "`"+c+"`") {
			t.Errorf("check %s is not in the table", c)
		}
	}
	// Rows are | seed | incident | checks | fixture machine |.
	for _, row := range regexp.MustCompile(`(?m)^\| 00\d .*$`).FindAllString(doc, -1) {
		cols := strings.Split(row, "|")
		if len(cols) < 5 {
			t.Errorf("row %q: want | seed | incident | checks | machine |", row)
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z_0-9]+)`").FindAllStringSubmatch(cols[3], -1) {
			if !known[m[1]] {
				t.Errorf("row %q names %s, which is not a check", row, m[1])
			}
		}
	}
	for _, name := range doctortest.Names(t) {
		if strings.HasPrefix(name, "seed") && !strings.Contains(doc, name) {
			t.Errorf("fixture machine %s is not in the table", name)
		}
	}
}

// The fixture machines are what testdata/gen writes: a hand edit to one
// file (or to the generator alone) fails here.
func TestFixturesAreGenerated(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "./testdata/gen", "-out", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen: %v: %s", err, out)
	}
	files := func(root string) map[string]string {
		m := map[string]string{}
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(path)
				rel, _ := filepath.Rel(root, path)
				m[rel] = string(b)
			}
			return err
		})
		return m
	}
	want, got := files(dir), files(doctortest.Dir())
	for p, c := range want {
		if got[p] != c {
			t.Errorf("%s differs from what testdata/gen writes: run go run ./internal/doctor/testdata/gen", p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s is not written by testdata/gen", p)
		}
	}
}
