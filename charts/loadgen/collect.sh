#!/usr/bin/env bash
# collect.sh: wait for every shard of a loadgen chart release to finish,
# copy each shard's JSON result out of the cluster (results.mode pod or pvc:
# kubectl cp; log: the LOADGEN-RESULT line of the shard's log, kubectl
# logs) and merge them into one report with `loadgen merge`.
#
#   charts/loadgen/collect.sh -n NAMESPACE -r RELEASE [-o DIR] [-t TIMEOUT_S]
#
# Needs kubectl (pointing at the cluster) and a loadgen binary (PATH, or
# LOADGEN=/path/to/loadgen; `go build -o bin/ ./cmd/loadgen` builds one).
# Writes DIR/shard-<i>.json for every shard (and DIR/shard-<i>.log in log
# mode) and DIR/merged.json, and exits non-zero if a shard's loadgen failed
# (its result is still collected when it exists, since a failed audit
# still writes its report).
set -euo pipefail

ns=default
release=""
out=""
timeout=7200
job=""

usage() {
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
}

while getopts "n:r:o:t:j:h" opt; do
	case "$opt" in
	n) ns=$OPTARG ;;
	r) release=$OPTARG ;;
	o) out=$OPTARG ;;
	t) timeout=$OPTARG ;;
	j) job=$OPTARG ;;
	*) usage ;;
	esac
done
[ -n "$release" ] || [ -n "$job" ] || usage

# The chart names the Job <release>-loadgen, or <release> when the release
# name already contains "loadgen" (-j overrides).
if [ -z "$job" ]; then
	case "$release" in
	*loadgen*) job=$release ;;
	*) job=$release-loadgen ;;
	esac
fi
out=${out:-results/$job}
loadgen=${LOADGEN:-loadgen}
command -v "$loadgen" >/dev/null || { echo "collect: no loadgen binary (set LOADGEN or build ./cmd/loadgen)" >&2; exit 1; }
k() { kubectl -n "$ns" "$@"; }

read -r shards mode < <(k get job "$job" -o jsonpath='{.spec.completions} {.metadata.annotations.chf-testbed/results-mode}{"\n"}') || true
[ -n "${shards:-}" ] || { echo "collect: job $job has no completions" >&2; exit 1; }

# The chart annotates the Job with its results mode. Without it (an older
# chart): pvc mode has a reader pod mounting the shared claim; pod mode
# keeps each result in its own pod until the holder container ends.
if [ -z "${mode:-}" ]; then
	mode=pod
	if k get pod "$job-reader" >/dev/null 2>&1; then
		mode=pvc
	fi
fi
echo "collect: job $job, $shards shards, results mode $mode" >&2

# Wait until the loadgen container of every index has terminated. Each line
# is "<index> <pod> <exit code or empty>"; a retried index has several pods,
# the last listed one wins.
deadline=$((SECONDS + timeout))
declare -A pod exitcode
while :; do
	pod=()
	exitcode=()
	while read -r idx name code; do
		[ -n "${idx:-}" ] || continue
		pod[$idx]=$name
		exitcode[$idx]=${code:-}
	done < <(k get pods -l "job-name=$job" -o jsonpath='{range .items[*]}{.metadata.annotations.batch\.kubernetes\.io/job-completion-index}{" "}{.metadata.name}{" "}{.status.containerStatuses[?(@.name=="loadgen")].state.terminated.exitCode}{"\n"}{end}')
	done_n=0
	for ((i = 0; i < shards; i++)); do
		[ -n "${exitcode[$i]:-}" ] && done_n=$((done_n + 1))
	done
	[ "$done_n" -eq "$shards" ] && break
	if [ "$SECONDS" -ge "$deadline" ]; then
		echo "collect: timed out with $done_n of $shards shards finished" >&2
		exit 1
	fi
	echo "collect: $done_n of $shards shards finished; waiting" >&2
	sleep 10
done

mkdir -p "$out"
failed=0
files=()
for ((i = 0; i < shards; i++)); do
	f=shard-$i.json
	if [ "$mode" = log ]; then
		# The last LOADGEN-RESULT line of the loadgen container's log
		# (loadgen run --result-log), without kubectl's --timestamps.
		if k logs "${pod[$i]}" -c loadgen >"$out/shard-$i.log" &&
			grep -a 'LOADGEN-RESULT ' "$out/shard-$i.log" | tail -n 1 | sed 's/^.*LOADGEN-RESULT //' >"$out/$f" &&
			[ -s "$out/$f" ]; then
			files+=("$out/$f")
		else
			rm -f "$out/$f"
			echo "collect: shard $i: no LOADGEN-RESULT line in the log of ${pod[$i]} (kept in $out/shard-$i.log)" >&2
			failed=1
		fi
	else
		if [ "$mode" = pvc ]; then
			src=$job-reader:/results/$f
			ctr=reader
		else
			src=${pod[$i]}:/results/$f
			ctr=results
		fi
		if k cp -c "$ctr" "$src" "$out/$f" >/dev/null; then
			files+=("$out/$f")
		else
			echo "collect: shard $i: no result file in ${src%%:*}" >&2
			failed=1
		fi
	fi
	if [ "${exitcode[$i]}" != 0 ]; then
		echo "collect: shard $i: loadgen exited ${exitcode[$i]} (pod ${pod[$i]})" >&2
		failed=1
	fi
done

[ "${#files[@]}" -gt 0 ] || { echo "collect: no shard results" >&2; exit 1; }
"$loadgen" merge -o "$out/merged.json" "${files[@]}"
echo "collect: merged ${#files[@]} of $shards shards into $out/merged.json" >&2
exit "$failed"
