#!/bin/bash
# Runs `make vmtest` (the guest matrix) N times in a row, 10 by default,
# and prints each run's result and time: the check that the matrix does
# not flake (vmtest/LOCKUP.md). Each run's log goes to $LOGDIR.
#   scripts/vmtest-loop.sh [N]
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
logdir=${LOGDIR:-$(mktemp -d /tmp/vmtest-loop.XXXXXX)}
mkdir -p "$logdir"
pass=0
for i in $(seq "$n"); do
	start=$(date +%s)
	if make vmtest >"$logdir/run-$i.log" 2>&1; then
		result=pass
		pass=$((pass + 1))
	else
		result=FAIL
	fi
	guests=$(grep -o 'kernel [0-9.]*: guest ran [0-9ms]*' "$logdir/run-$i.log" | sed 's/kernel //; s/: guest ran / /' | tr '\n' ' ')
	printf 'run %2d: %s in %4d s (guests: %s)\n' "$i" "$result" "$(($(date +%s) - start))" "$guests"
done
echo "$pass of $n runs passed; logs in $logdir"
[ "$pass" -eq "$n" ]
