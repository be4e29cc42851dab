#!/usr/bin/env bash
# bench-creates.sh: sustained Nchf creates/s and the CPU each CHF process
# spends per create, with h2load (Debian nghttp2-client) posting creates to
# `chf local`.
#
#   local/bench-creates.sh [sms|session] [ACCOUNTS] [CREATES_PER_ACCOUNT]
#
# h2load posts one fixed body per run, so each account gets its own h2load
# run (-c1 -m$INFLIGHT); $PARALLEL runs go at once. "sms" posts one-time
# event creates (oneTimeEvent, RG 30: an immediate debit, no session left);
# "session" posts data session creates (RG 10), which stay open, so each
# account's record grows by one session per create (keep
# CREATES_PER_ACCOUNT small; an account holds at most 1024 open sessions).
# CPU per process comes from /proc/PID/stat (utime+stime) before and after.
# PROFILE=1 also writes a CPU profile of the CGW and prints its top.
#
# Environment: CHF (default bin/chf), PORT (28931), PARALLEL (8),
# INFLIGHT (8), CGW_ARGS, OCP_ARGS, ABM_ARGS (extra service flags).
set -euo pipefail

mode=${1:-sms}
accounts=${2:-8}
per=${3:-8000}
chf=${CHF:-bin/chf}
port=${PORT:-28931}
parallel=${PARALLEL:-8}
inflight=${INFLIGHT:-8}
case $mode in sms|session) ;; *) echo "bench-creates: mode must be sms or session, not $mode" >&2; exit 2 ;; esac
[[ $accounts =~ ^[0-9]+$ && $accounts -ge 1 ]] || { echo "bench-creates: ACCOUNTS must be a positive number" >&2; exit 2; }
[[ $per =~ ^[0-9]+$ && $per -ge 1 ]] || { echo "bench-creates: CREATES_PER_ACCOUNT must be a positive number" >&2; exit 2; }
if [[ $mode == session && $per -gt 1000 ]]; then
	echo "bench-creates: at most 1000 session creates per account (an account holds 1024 open sessions)" >&2; exit 2
fi
command -v h2load >/dev/null || { echo "bench-creates: h2load not found (make tools installs nghttp2-client)" >&2; exit 2; }
[[ -x $chf ]] || { echo "bench-creates: $chf not found (make build)" >&2; exit 2; }

tmp=$(mktemp -d)
lp=
cleanup() { [[ -n $lp ]] && kill "$lp" 2>/dev/null && wait "$lp" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
cgw_args=${CGW_ARGS:-}
[[ ${PROFILE:-0} == 1 ]] && cgw_args="$cgw_args --cpuprofile $tmp/cgw.pprof"

"$chf" local --nchf 127.0.0.1:"$port" --accounts "$accounts" \
	--cgw-args "$cgw_args" --ocp-args "${OCP_ARGS:-}" --abm-args "${ABM_ARGS:-}" >"$tmp/local.log" 2>&1 &
lp=$!
for _ in $(seq 150); do
	grep -q "http://" "$tmp/local.log" && break
	kill -0 "$lp" 2>/dev/null || break
	sleep 0.2
done
if ! grep -q "http://" "$tmp/local.log"; then
	echo "bench-creates: chf local did not start:" >&2; tail -5 "$tmp/local.log" >&2; exit 1
fi

declare -A name start
pids=$(pgrep -P "$lp")
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
for p in $pids; do
	name[$p]=$(tr '\0' ' ' <"/proc/$p/cmdline" | awk '{print $2}')
	start[$p]=$(cpu "$p")
done

for s in $(seq 1 "$accounts"); do
	supi=$(printf 'imsi-00101%010d' "$s")
	if [[ $mode == sms ]]; then
		printf '{"subscriberIdentifier":"%s","nfConsumerIdentification":{"nodeFunctionality":"SMSF","nFName":"5f2c1e1a-0000-4000-8000-000000000001"},"invocationTimeStamp":"2026-11-30T00:00:00.000Z","invocationSequenceNumber":0,"oneTimeEvent":true,"oneTimeEventType":"IEC","multipleUnitUsage":[{"ratingGroup":30,"requestedUnit":{"serviceSpecificUnits":1}}]}' "$supi"
	else
		printf '{"subscriberIdentifier":"%s","nfConsumerIdentification":{"nodeFunctionality":"SMF","nFName":"5f2c1e1a-0000-4000-8000-000000000001"},"invocationTimeStamp":"2026-11-30T00:00:00.000Z","invocationSequenceNumber":0,"multipleUnitUsage":[{"ratingGroup":10,"requestedUnit":{"totalVolume":1000000}}]}' "$supi"
	fi >"$tmp/body.$s"
done
echo "bench-creates: $mode creates, $accounts accounts x $per, $parallel h2load runs at once, $inflight in flight each" >&2
t0=$(date +%s.%N)
seq 1 "$accounts" | xargs -P "$parallel" -I{} sh -c \
	"h2load -n $per -c1 -m $inflight -d $tmp/body.{} -H 'content-type: application/json' http://127.0.0.1:$port/nchf-convergedcharging/v3/chargingdata >$tmp/h2load.{} 2>&1"
t1=$(date +%s.%N)

ok=$(grep -h '^status codes:' "$tmp"/h2load.* | awk '{s+=$3} END{print s+0}')
bad=$(grep -h '^requests:' "$tmp"/h2load.* | awk '{s+=$10+$12+$14} END{print s+0}')
non2xx=$(grep -h '^status codes:' "$tmp"/h2load.* | awk '{s+=$5+$7+$9} END{print s+0}')
wall=$(echo "$t1 - $t0" | bc -l)
hz=$(getconf CLK_TCK)
printf '%-8s %12s %16s\n' process "µs/create" "CPU s per 1000"
total=0
for p in $pids; do
	d=$(($(cpu "$p") - ${start[$p]}))
	us=$(echo "$d * 1000000 / $hz / $ok" | bc -l)
	total=$(echo "$total + $us" | bc -l)
	printf '%-8s %12.1f %16.3f\n' "${name[$p]}" "$us" "$(echo "$us / 1000" | bc -l)"
done
printf '%-8s %12.1f %16.3f\n' SUT "$total" "$(echo "$total / 1000" | bc -l)"
printf 'creates 2xx %d, non-2xx %d, failed/errored/timeout %d in %.1f s: %.0f creates/s\n' "$ok" "$non2xx" "$bad" "$wall" "$(echo "$ok / $wall" | bc -l)"
if [[ ${PROFILE:-0} == 1 ]]; then
	kill "$lp"; wait "$lp" 2>/dev/null || true; lp=
	echo "top of the CGW's CPU profile:"
	go tool pprof -top -nodecount 25 "$chf" "$tmp/cgw.pprof" 2>/dev/null | sed -n '1,32p'
fi
[[ $non2xx -eq 0 && $bad -eq 0 ]]
