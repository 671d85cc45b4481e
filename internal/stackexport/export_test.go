package stackexport

import (
	"github.com/numatrace/numatrace/internal/aggregate"
	"github.com/numatrace/numatrace/internal/stall"
)

// The test samples: two causes, two threads of one process, kernel and
// user stacks sharing frames, a C++ name with spaces and ';', frames
// without a symbol, and two samples without a stack.
const (
	dbPath   = "/usr/bin/db"
	libcPath = "/usr/lib/libc.so.6"
	cppName  = "db::Cache<int, long>::get(key; int)"
)

var (
	shrinkFrame = stall.Frame{Addr: 0xffffffff81234560, Func: "shrink_folio_list", Module: stall.KernelModule}
	tryFree     = stall.Frame{Addr: 0xffffffff81200010, Func: "try_to_free_mem_cgroup_pages", Module: stall.KernelModule}
	compactZone = stall.Frame{Addr: 0xffffffff81300000, Func: "compact_zone", Module: stall.KernelModule}
	ext4Frame   = stall.Frame{Addr: 0xffffffffc0a01234, Module: "[ext4]", Offset: 0x1234}
	cacheGet    = stall.Frame{Addr: 0x555500001a2b, Func: cppName, Module: dbPath, BuildID: "abc123", Offset: 0x1a2b}
	dbMain      = stall.Frame{Addr: 0x555500001000, Func: "main", Module: dbPath, BuildID: "abc123", Offset: 0x1000}
	libcFrame   = stall.Frame{Addr: 0x7f0000009f00, Module: libcPath, BuildID: "def456", Offset: 0x9f00}
)

func testSamples() []aggregate.StackSample {
	reclaim := stall.NewStack([]stall.Frame{shrinkFrame, tryFree}, []stall.Frame{cacheGet, dbMain}, "")
	compaction := stall.NewStack([]stall.Frame{ext4Frame, compactZone}, []stall.Frame{libcFrame, dbMain}, "")
	return []aggregate.StackSample{
		{Cause: stall.MemcgReclaim, PID: 100, TID: 101, Comm: "worker-1", Process: "db", Count: 3, Ns: 1_500_000, Stack: reclaim},
		{Cause: stall.Compaction, PID: 100, TID: 102, Comm: "worker 2", Process: "db", Count: 1, Ns: 2_500, Stack: compaction},
		{Cause: stall.MemcgReclaim, PID: 100, TID: 101, Comm: "worker-1", Process: "db", Count: 1, Ns: 400},
		{Cause: stall.MemcgReclaim, PID: 100, TID: 101, Comm: "worker-1", Process: "db", Count: 2, Ns: 500_000, Stack: reclaim},
		{Cause: stall.Compaction, PID: 100, TID: 102, Comm: "worker 2", Process: "db", Count: 1, Ns: 1_499, Stack: stall.NewStack(nil, nil, "lost in the kernel")},
	}
}
