#!/usr/bin/env bash
# progress.sh LABEL COMMAND [ARG...] runs COMMAND and, while it runs, prints
# "LABEL: still running, N s" to stderr every PROGRESS_EVERY seconds
# (default 30), then "LABEL: done in N s" (or the failure and its exit
# code). For the one-time builds of `make test` and `make cluster-*`, which
# take minutes on a cold cache and print nothing meanwhile.
set -uo pipefail
if (($# < 2)); then
	echo "usage: progress.sh LABEL COMMAND [ARG...]" >&2
	exit 2
fi
label=$1
shift
every=${PROGRESS_EVERY:-30}
start=$SECONDS
echo "$label: started" >&2
"$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid"; exit 130' INT TERM
while kill -0 "$pid" 2>/dev/null; do
	for ((i = 0; i < every * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break 2
		sleep 0.1
	done
	echo "$label: still running, $((SECONDS - start)) s" >&2
done
wait "$pid"
rc=$?
if ((rc == 0)); then
	echo "$label: done in $((SECONDS - start)) s" >&2
else
	echo "$label: failed (exit $rc) after $((SECONDS - start)) s" >&2
fi
exit $rc
