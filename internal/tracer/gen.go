//go:build linux

package tracer

// One object per concern: every bpf/*.bpf.c is compiled, and
// objects_gen.go lists their loaders. types.bpf.c anchors the structs
// and enums shared with Go, generated here with -type.
//go:generate go run ./bpfgen -types event,stack_event,hist_key,hist,thread_counts,migr_rec,cause,event_kind,event_flag,counter_id,filter_mode,lat_sample,lat_flag,thread_stall,child_total,pending_slot,memstall_reason,wait_part
