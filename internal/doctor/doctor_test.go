package doctor

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tree builds a fixture root: testdata/base, a healthy two-node machine
// with process 4242, overlaid with testdata/<overlay>.
func tree(t *testing.T, overlay string) string {
	t.Helper()
	root := t.TempDir()
	for _, src := range []string{"testdata/base", filepath.Join("testdata", overlay)} {
		if overlay == "" && src != "testdata/base" {
			continue
		}
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, path)
			dst := filepath.Join(root, rel)
			if d.IsDir() {
				return os.MkdirAll(dst, 0o755)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func run(t *testing.T, root string, pid int) *Report {
	t.Helper()
	r, err := Run(Options{Root: root, PID: pid})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func find(r *Report, check string) *Finding {
	for i := range r.Findings {
		if r.Findings[i].Check == check {
			return &r.Findings[i]
		}
	}
	return nil
}

func TestHealthyMachineHasNoFindings(t *testing.T) {
	r := run(t, tree(t, ""), 4242)
	if len(r.Findings) != 0 {
		t.Fatalf("findings on a healthy machine: %+v", r.Findings)
	}
	if len(r.Skipped) != 0 {
		t.Errorf("checks skipped on a complete tree: %v", r.Skipped)
	}
}

// Each check fires on its own fixture tree, with the severity, evidence
// and fix an SRE needs, and stays quiet on a near miss.
func TestEachCheckFiresAndStaysQuiet(t *testing.T) {
	cases := []struct {
		check    string
		severity Severity
		evidence string // a value the finding must quote
		fix      string
	}{
		{"zone_reclaim_mode", Crit, "zone_reclaim_failed = 731", "sysctl -w vm.zone_reclaim_mode=0"},
		{"thp_defrag", Warn, "defrag = always", "echo madvise > /sys/kernel/mm/transparent_hugepage/defrag"},
		{"numa_balancing", Warn, "numa_balancing = 1", "sysctl -w kernel.numa_balancing=0"},
		{"binding", Crit, "numa_maps policy = bind:1", "--membind=0"},
		{"interleave", Warn, "interleave:0-1", "numactl"},
		{"node_imbalance", Warn, "node 0: free 9000 pages, low 10000", "numastat"},
		{"hugepage_reservation", Crit, "HugePages_Free = 4000", "sysctl -w vm.nr_hugepages=96"},
		{"watermarks", Warn, "min_free_kbytes = 41943040", "sysctl -w vm.min_free_kbytes="},
		{"nic_irq_affinity", Warn, "IRQ affinity nodes = 1", "echo 0,1 > /proc/irq/$i/smp_affinity_list"},
		{"container", Info, "/.dockerenv exists", ""},
		{"psi_memory", Crit, "memory.pressure full avg10 = 8.25", "numatrace attach"},
	}
	for _, c := range cases {
		t.Run(c.check, func(t *testing.T) {
			r := run(t, tree(t, c.check+"/fires"), 4242)
			f := find(r, c.check)
			if f == nil {
				t.Fatalf("did not fire; findings: %+v, skipped: %v", r.Findings, r.Skipped)
			}
			if f.Severity != c.severity {
				t.Errorf("severity %s, want %s", f.Severity, c.severity)
			}
			if !strings.Contains(strings.Join(f.Evidence, "\n"), c.evidence) {
				t.Errorf("evidence lacks %q:\n%s", c.evidence, strings.Join(f.Evidence, "\n"))
			}
			if !strings.Contains(f.Fix, c.fix) {
				t.Errorf("fix %q lacks %q", f.Fix, c.fix)
			}
			if f.Title == "" || f.Why == "" || f.TradeOff == "" || (f.Severity > Info && f.Persist == "") {
				t.Errorf("incomplete finding: %+v", f)
			}
			if q := find(run(t, tree(t, c.check+"/ok"), 4242), c.check); q != nil {
				t.Errorf("fired on the near miss: %+v", q)
			}
		})
	}
}

// Counters that must grow are read twice.
func TestGrowthIsEvidence(t *testing.T) {
	root := tree(t, "thp_defrag/fires")
	r, err := Run(Options{Root: root, Interval: time.Second, Sleep: func(time.Duration) {
		vm := filepath.Join(root, "proc/vmstat")
		b, _ := os.ReadFile(vm)
		os.WriteFile(vm, []byte(strings.Replace(string(b), "compact_stall 5", "compact_stall 17", 1)), 0o644)
	}})
	if err != nil {
		t.Fatal(err)
	}
	f := find(r, "thp_defrag")
	if f == nil || f.Severity != Crit || !strings.Contains(strings.Join(f.Evidence, "\n"), "compact_stall growth over 1s = 12") {
		t.Fatalf("growing compact_stall not shown as critical: %+v", f)
	}
}

func TestBoundToOneBusyNode(t *testing.T) {
	root := tree(t, "numa_balancing/fires") // bound to node 0's CPUs 0-1
	r, err := Run(Options{Root: root, PID: 4242, Interval: time.Second, Sleep: func(time.Duration) {
		st := filepath.Join(root, "proc/4242/stat")
		b, _ := os.ReadFile(st)
		// 300+200 ticks before, 395+295 after: 1.9 s of CPU in 1 s.
		os.WriteFile(st, []byte(strings.Replace(string(b), " 300 200 ", " 395 295 ", 1)), 0o644)
	}})
	if err != nil {
		t.Fatal(err)
	}
	var busy *Finding
	for i, f := range r.Findings {
		if f.Check == "binding" && strings.Contains(f.Title, "uses all of them") {
			busy = &r.Findings[i]
		}
	}
	if busy == nil || !strings.Contains(strings.Join(busy.Evidence, "\n"), "1.90 CPUs") {
		t.Fatalf("a process saturating its one node was not reported: %+v", r.Findings)
	}
}

func TestNumastat(t *testing.T) {
	r := run(t, tree(t, "binding/fires"), 4242)
	ns := r.Numastat
	if ns == nil {
		t.Fatal("no numastat table")
	}
	if ns.Rows["heap"]["N1"] != 100 || ns.Rows["private"]["N1"] != 200 || ns.Total["N0"] != 0 || ns.Remote != 1 {
		t.Errorf("table %+v remote %.2f; want heap 100 MiB and private 200 MiB on node 1, all remote", ns.Rows, ns.Remote)
	}
	var b strings.Builder
	ns.Write(&b, 4242, "app")
	for _, want := range []string{"Node 0", "Node 1", "Heap", "100.00", "Remote to its CPUs' node(s) 0: 100.0%"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	js, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(js), `"severity":"crit"`) {
		t.Errorf("JSON: %v %s", err, js)
	}
}

func TestMissingPIDAndMissingFiles(t *testing.T) {
	root := tree(t, "")
	if _, err := Run(Options{Root: root, PID: 999}); !errors.Is(err, ErrNoProcess) {
		t.Errorf("missing pid: %v", err)
	}
	// A kernel without PSI or THP: the checks say why they did not run.
	os.RemoveAll(filepath.Join(root, "proc/pressure"))
	os.RemoveAll(filepath.Join(root, "sys/kernel/mm/transparent_hugepage"))
	r := run(t, root, 0)
	got := strings.Join(r.Skipped, "\n")
	for _, want := range []string{"psi_memory: /proc/pressure/memory not readable", "thp_defrag: no transparent huge pages"} {
		if !strings.Contains(got, want) {
			t.Errorf("skipped lacks %q: %v", want, r.Skipped)
		}
	}
	if _, err := Run(Options{Root: t.TempDir()}); err == nil {
		t.Error("an empty root gave no error")
	}
}
