#!/bin/bash
# Installs what building, generating and testing numatrace needs on a fresh
# Debian machine. Safe to run again: it installs only what is missing.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have clang || need+=(clang)
have llvm-strip || need+=(llvm)
have bpftool || need+=(bpftool)
have bpftrace || need+=(bpftrace)
have qemu-system-x86_64 || need+=(qemu-system-x86)
have gcc || need+=(gcc)
have redis-server || need+=(redis-server) # the real-server correlation test
# Real servers' own logs read as they are (internal/latency/source), and
# the request source's real-workload tests: nginx, PostgreSQL and pgbench,
# wrk.
have nginx || need+=(nginx)
compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null && have pgbench || need+=(postgresql)
have wrk || need+=(wrk)
# The disk I/O budget's test: MariaDB's InnoDB reading a throttled disk
# under sysbench's point selects.
PATH=$PATH:/usr/sbin:/sbin have mariadbd || need+=(mariadb-server)
have sysbench || need+=(sysbench)
have tmux || need+=(tmux)                 # drives the TUI in a real terminal in tests
have curl || need+=(curl)                 # fetches serve's stall profile in tests
# The redis incident's hog writes to a throttled loop device (testutil.SlowDisk).
PATH=$PATH:/usr/sbin:/sbin have losetup || need+=(mount)
PATH=$PATH:/usr/sbin:/sbin have mkfs.ext4 || need+=(e2fsprogs)
have prometheus || need+=(prometheus)     # scrapes numatrace serve in its test
have systemd-analyze || need+=(systemd)   # verifies deploy/systemd/numatrace.service (a container may lack it)
have buildah || need+=(buildah)           # make image: builds the container image, daemonless and offline
# The image runs under podman as the DaemonSet runs it: runc (crun refuses
# a hybrid cgroup layout), a bridge network to scrape it from the host, and
# the runtime default seccomp profile the shipped one is checked against.
have podman || need+=(podman containernetworking-plugins iptables)
have runc || need+=(runc)
[[ -e /usr/share/containers/seccomp.json ]] || need+=(golang-github-containers-common)

if ((${#need[@]})); then
	echo "install-deps: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# Install servers (redis, prometheus, nginx, postgresql, mariadb) without starting their daemons:
	# the tests start their own, on ports of their choosing.
	policy=/usr/sbin/policy-rc.d
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' > "$policy"
		chmod +x "$policy"
		trap 'rm -f "$policy"' EXIT
	fi
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
