# numatrace: see README.md. `make` builds, `make test` is what CI runs.
GO ?= go
BIN := numatrace
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
GOTEST_FLAGS ?= -count=1 -p 1 -timeout 30m

ARGS ?= --duration 10s

.PHONY: all build cross image run demo deps generate check-generated vmlinux lint test test-unit vmtest fuzz bench clean

all: build

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/numatrace

# Replay, report, export, doctor --root and the view run on a laptop too:
# tracing is the only Linux-only part. Keep both builds working.
cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/numatrace
	GOOS=linux GOARCH=arm64 $(GO) build -o /dev/null ./cmd/numatrace

# The container image (Containerfile), daemonless with buildah, offline:
# an empty base and the static binary for each of IMAGE_ARCHES, joined in
# one manifest list $(IMAGE):$(VERSION). Push it with
#   buildah manifest push --all $(IMAGE):$(VERSION) docker://ghcr.io/numatrace/numatrace:$(VERSION)
IMAGE ?= localhost/numatrace
IMAGE_ARCHES ?= amd64 arm64
IMAGE_DIR := build/image
image: deps
	rm -rf $(IMAGE_DIR) && mkdir -p $(IMAGE_DIR)
	for arch in $(IMAGE_ARCHES); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" \
			-o $(IMAGE_DIR)/numatrace-linux-$$arch ./cmd/numatrace || exit 1; \
	done
	if buildah manifest exists $(IMAGE):$(VERSION); then buildah manifest rm $(IMAGE):$(VERSION); fi
	buildah manifest create $(IMAGE):$(VERSION)
	for arch in $(IMAGE_ARCHES); do \
		buildah build --quiet --pull=never --arch $$arch --os linux --build-arg TARGETARCH=$$arch \
			-f Containerfile -t $(IMAGE):$(VERSION)-$$arch --manifest $(IMAGE):$(VERSION) $(IMAGE_DIR) || exit 1; \
	done
	@echo "built $(IMAGE):$(VERSION) ($(IMAGE_ARCHES)); push: buildah manifest push --all $(IMAGE):$(VERSION) docker://REGISTRY/numatrace:$(VERSION)"

# The main job: trace the whole machine (as root) and print the report.
run: build
	./$(BIN) attach --no-tui $(ARGS)

# Replay a shipped incident (redis in a memcg at its limit): no root, no
# BPF, works anywhere. On a terminal it opens the view (q quits and prints
# the report); elsewhere it prints the report, which opens on its verdict.
demo: build
	./$(BIN) replay --speed 5 testdata/recordings/redis-memcg-hog.ntr

deps:
	./scripts/install-deps.sh

# Rebuild the BPF objects and their Go bindings (needs clang and llvm-strip).
generate:
	$(GO) generate ./internal/tracer

# CI: the committed objects must be exactly what the sources produce.
check-generated: generate
	@git add -N internal/tracer 2>/dev/null || true
	@git diff --exit-code --stat -- internal/tracer || \
		(echo "generated BPF objects are stale: run 'make generate' and commit" >&2; exit 1)

# Regenerate headers/vmlinux.h from the running kernel's BTF.
vmlinux:
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > headers/vmlinux.h

lint:
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed on:"; gofmt -l .; exit 1)
	$(GO) mod tidy -diff
	$(GO) vet ./...

test-unit:
	$(GO) test $(GOTEST_FLAGS) ./...

# The two-node QEMU guests: real NUMA stalls on the kernel matrix (vmtest/).
# Kernel packages are cached in $(NUMATRACE_VMTEST_CACHE), or vmtest/cache.
vmtest: deps
	$(GO) test -count=1 -timeout 15m -v -run TestGuestKernels ./vmtest -vm

# A short run of each fuzz target: the recording reader and a whole
# replay (each input held to a heap bound), the fast JSON path for
# snapshots (held to encoding/json's results), and the symbolizer's
# readers of other processes' files (ELF, unwind tables, Go's pclntab,
# .dynsym) and its total memory budget. Go minimizes
# each new input for up to a minute by default, which on a 30 KB seed
# recording is the whole run: 2 s leaves the time for fuzzing.
# Each target runs in a memory cgroup capped at FUZZMEM (all its
# processes together, FUZZWORKERS workers, and the compiler before them):
# an input that makes any decoder grow without bound gets the run
# OOM-killed, which fails it. FuzzReader and FuzzReplay also hold each
# input to a tighter bound of their own.
# Each target runs a number of inputs, not a time: about 20 s of them on
# a fresh 2-core machine (less once Go's fuzz cache holds what it found).
# With -fuzztime 30s, Go 1.26's coordinator failed a run with a bare
# "context deadline exceeded" when the deadline passed as a worker was
# busy (go.dev/issue/75804, fixed in Go 1.27): a count has no deadline to
# race. FUZZSCALE multiplies every count.
FUZZSCALE ?= 1
FUZZWORKERS ?= 2
FUZZMEM ?= 3221225472
FUZZ := ./scripts/in-memcg.sh $(FUZZMEM) $(GO) test -run '^$$' -parallel $(FUZZWORKERS) -fuzzminimizetime 2s
fuzzn = -fuzztime $(shell echo $$(( $(1) * $(FUZZSCALE) )))x
fuzz:
	$(FUZZ) $(call fuzzn,30000) -fuzz '^FuzzReader$$' ./internal/record
	$(FUZZ) $(call fuzzn,300000) -fuzz '^FuzzBlock$$' ./internal/record
	$(FUZZ) $(call fuzzn,400000) -fuzz '^FuzzHistJSON$$' ./internal/record
	$(FUZZ) $(call fuzzn,400000) -fuzz '^FuzzThreadJSON$$' ./internal/record
	$(FUZZ) $(call fuzzn,400000) -fuzz '^FuzzSnapshotJSON$$' ./internal/record
	$(FUZZ) $(call fuzzn,300000) -fuzz '^FuzzSnapshotRecord$$' ./internal/record
	$(FUZZ) $(call fuzzn,100) -fuzz '^FuzzReplay$$' ./internal/replay
	$(FUZZ) $(call fuzzn,100000) -fuzz '^FuzzUnwindTable$$' ./internal/symbolize
	$(FUZZ) $(call fuzzn,30000) -fuzz '^FuzzParseELF$$' ./internal/symbolize
	$(FUZZ) $(call fuzzn,100000) -fuzz '^FuzzPclntab$$' ./internal/symbolize
	$(FUZZ) $(call fuzzn,100000) -fuzz '^FuzzDynsym$$' ./internal/symbolize
	$(FUZZ) $(call fuzzn,2000) -fuzz '^FuzzUserBudget$$' ./internal/symbolize

# Everything CI checks. Privileged tests fail, not skip, when CI=true.
test: deps check-generated lint build cross image
	NUMATRACE_IMAGE=$(IMAGE):$(VERSION)-$(shell $(GO) env GOARCH) $(GO) test $(GOTEST_FLAGS) ./...
	$(MAKE) fuzz
	$(MAKE) vmtest

bench: deps build
	./bench/run.sh

clean:
	rm -f $(BIN)
