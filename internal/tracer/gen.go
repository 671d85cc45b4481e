//go:build linux

package tracer

// One object per concern; types.bpf.c anchors the shared structs for -type.
//go:generate go tool bpf2go -tags linux -target bpfel -type event -type hist_key -type hist -type thread_counts -type migr_rec -type cause -type event_kind -type event_flag -type counter_id -type filter_mode -type lat_sample types ../../bpf/types.bpf.c -- -nostdinc -I../../headers -I../../bpf
//go:generate go tool bpf2go -tags linux -target bpfel reclaim ../../bpf/reclaim.bpf.c -- -nostdinc -I../../headers -I../../bpf
//go:generate go tool bpf2go -tags linux -target bpfel compaction ../../bpf/compaction.bpf.c -- -nostdinc -I../../headers -I../../bpf
//go:generate go tool bpf2go -tags linux -target bpfel numa ../../bpf/numa.bpf.c -- -nostdinc -I../../headers -I../../bpf
//go:generate go tool bpf2go -tags linux -target bpfel sched ../../bpf/sched.bpf.c -- -nostdinc -I../../headers -I../../bpf
//go:generate go tool bpf2go -tags linux -target bpfel mmaplock ../../bpf/mmap_lock.bpf.c -- -nostdinc -I../../headers -I../../bpf
//go:generate go tool bpf2go -tags linux -target bpfel latency ../../bpf/latency.bpf.c -- -nostdinc -I../../headers -I../../bpf
