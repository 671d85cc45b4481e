package stackexport

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
)

func TestWriteFolded(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFolded(&buf, testSamples()); err != nil {
		t.Fatal(err)
	}
	want := "compaction;db;worker_2;[no_stack] 1\n" +
		"compaction;db;worker_2;main;libc.so.6+0x9f00;compact_zone_[k];[ext4]+0xffffffffc0a01234_[k] 3\n" +
		"memcg_reclaim;db;worker-1;[no_stack] 1\n" +
		"memcg_reclaim;db;worker-1;main;db::Cache<int,_long>::get(key__int);try_to_free_mem_cgroup_pages_[k];shrink_folio_list_[k] 2000\n"
	if got := buf.String(); got != want {
		t.Errorf("folded stacks:\n%s\nwant:\n%s", got, want)
	}
}

// Every folded line is its stack, one space and its value: a reader that
// splits at the first space (not only flamegraph.pl's last) reads the
// stack whole. The frame of a stall with no stack, "[no stack]", broke
// it wherever a thread's stall time was not all under stacks (an
// mmap_lock stall under --stacks-min, on an Intel host).
func TestFoldedLinesHaveOneSpace(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFolded(&buf, testSamples()); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if !regexp.MustCompile(`^[^ ]+ [0-9]+$`).MatchString(line) {
			t.Errorf("not a folded line: %q", line)
		}
	}
}

func TestFoldedName(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "[unknown]",
		"a b;c\td":          "a_b_c\\x09d",
		"operator()\u00a0x": "operator()_x",
		"evil\x1b]0;x":      "evil\\x1b]0_x",
	} {
		if got := foldedName(in); got != want {
			t.Errorf("foldedName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMicros(t *testing.T) {
	for ns, want := range map[uint64]uint64{
		0: 0, 1: 1, 499: 1, 1_499: 1, 1_500: 2, 2_500: 3, 1_000_000: 1000,
		^uint64(0): ^uint64(0)/1000 + 1,
	} {
		if got := micros(ns); got != want {
			t.Errorf("micros(%d) = %d, want %d", ns, got, want)
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errFull }

var errFull = errors.New("disk full")

func TestWriteFoldedError(t *testing.T) {
	if err := WriteFolded(failWriter{}, testSamples()); !errors.Is(err, errFull) {
		t.Errorf("WriteFolded to a failing writer = %v, want %v", err, errFull)
	}
}

// A stall whose stack a bound left out is shown under the note that says
// which, not as one without a stack.
func TestLeftOutStacksAreNamed(t *testing.T) {
	samples := []aggregate.StackSample{
		{Cause: stall.MemcgReclaim, PID: 1, TID: 1, Comm: "db", Process: "db", Count: 2, Ns: 2000,
			Stack: stall.LeftOutStack("stack left out: past 1 MiB")},
		{Cause: stall.MemcgReclaim, PID: 1, TID: 1, Comm: "db", Process: "db", Count: 1, Ns: 1000,
			Stack: stall.NewStack(nil, nil, "kernel stack not taken")},
	}
	var folded bytes.Buffer
	if err := WriteFolded(&folded, samples); err != nil {
		t.Fatal(err)
	}
	want := "memcg_reclaim;db;db;[no_stack] 1\nmemcg_reclaim;db;db;[stack_left_out:_past_1_MiB] 2\n"
	if folded.String() != want {
		t.Errorf("folded:\n%s\nwant:\n%s", folded.String(), want)
	}
	var pp bytes.Buffer
	if err := WritePprof(&pp, samples, testStart, testDur, "2 stalls' stacks left out"); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&pp)
	if err != nil {
		t.Fatal(err)
	}
	if got := frameNames(p.Sample[0]); !reflect.DeepEqual(got, []string{"[stack left out: past 1 MiB]"}) || len(p.Comments) != 1 {
		t.Errorf("pprof: frames %q, comments %q", got, p.Comments)
	}
}
