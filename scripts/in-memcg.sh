#!/bin/bash
# in-memcg.sh LIMIT CMD...: runs CMD in a memory cgroup of its own capped at
# LIMIT bytes (swap included), so a run that grows without bound is
# OOM-killed and fails instead of taking the machine. make fuzz runs each
# target in one: every worker process counts against the cap. Needs root
# and a memory controller (v1, or v2 with memory delegated to children);
# without them CMD runs uncapped, said once, and CI=true makes that a
# failure.
set -euo pipefail
if (($# < 2)); then
	echo "usage: in-memcg.sh LIMIT_BYTES CMD..." >&2
	exit 2
fi
limit=$1
shift
v2=/sys/fs/cgroup
v1=/sys/fs/cgroup/memory
# Where this shell is now, to go back to before removing the cgroup.
if [[ -f $v2/cgroup.controllers ]] && grep -qw memory "$v2/cgroup.subtree_control" 2>/dev/null; then
	home=$v2$(sed -n 's/^0:://p' /proc/self/cgroup)
	cg=$v2/numatrace-capped-$$
	limits=("memory.max" "memory.swap.max=0")
elif [[ -w $v1/cgroup.procs ]]; then
	home=$v1$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
	cg=$v1/numatrace-capped-$$
	limits=("memory.limit_in_bytes" "memory.memsw.limit_in_bytes")
else
	if [[ ${CI:-} == true ]]; then
		echo "in-memcg: no memory cgroup to cap $* in" >&2
		exit 1
	fi
	echo "in-memcg: no memory cgroup: running $* uncapped" >&2
	exec "$@"
fi

mkdir "$cg"
cleanup() {
	set +e
	echo $$ > "$home/cgroup.procs"
	# Anything CMD left behind (a fuzz worker after an OOM kill) goes too.
	for _ in 1 2 3 4 5; do
		pids=$(cat "$cg/cgroup.procs" 2>/dev/null)
		[[ -z $pids ]] && break
		kill -9 $pids 2>/dev/null
		sleep 0.2
	done
	rmdir "$cg" || echo "in-memcg: could not remove $cg" >&2
}
trap cleanup EXIT
echo "$limit" > "$cg/${limits[0]}"
case ${limits[1]} in
*=*) file=${limits[1]%%=*} value=${limits[1]#*=} ;;
*) file=${limits[1]} value=$limit ;;
esac
# Swap counts too where the kernel accounts it; said when it cannot.
echo "$value" > "$cg/$file" 2>/dev/null || echo "in-memcg: $cg/$file not set: swap is not capped" >&2
echo $$ > "$cg/cgroup.procs"

status=0
"$@" || status=$?
# v2 counts kills in memory.events, v1 in memory.oom_control: one exists.
oom=$({ cat "$cg/memory.events" "$cg/memory.oom_control" 2>/dev/null || true; } | awk '/^oom_kill / {n += $2} END {print n + 0}')
if ((oom > 0)); then
	echo "in-memcg: $* went past $limit bytes: $oom processes OOM-killed" >&2
	((status != 0)) || status=1
fi
exit $status
