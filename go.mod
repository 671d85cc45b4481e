module github.com/numatrace/numatrace

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0
	github.com/klauspost/compress v1.18.0
	golang.org/x/sys v0.49.0
)

require golang.org/x/sync v0.24.0 // indirect

tool github.com/cilium/ebpf/cmd/bpf2go
