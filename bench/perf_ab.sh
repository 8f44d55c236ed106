#!/usr/bin/env bash
# perf_ab.sh CLIENT STREAMS: one paced client's CPU and system calls per
# event, for A/B comparisons of clients or builds (bench/README.md, #21).
#
# The simulator runs on core 0 paced to 20,000 token events/s in all
# (a step of STREAMS / 20,000 s), the client on core 1 for 14 s, and
# `perf stat` counts the client's task-clock and system calls over 6 s of
# it (~120,000 events). CLIENT: ts (`tokenstorm run`, TOKENSTORM=binary to
# compare builds, TS_ARGS e.g. "--no-kernel-timestamps") or sse (bench/out/sseload, SSELOAD=binary, SSELOAD_ARGS
# e.g. "--recv uring"). Traffic stays on 127.0.0.1; the run ends by itself.
set -euo pipefail
client=${1:?usage: perf_ab.sh ts|sse STREAMS}
streams=${2:-100}
root=$(cd "$(dirname "$0")/.." && pwd)
ts=${TOKENSTORM:-$root/build/tokenstorm}
sseload=${SSELOAD:-$root/bench/out/sseload}
port=${PORT:-18656}
step=$(python3 -c "print(max($streams / 20000 * 1e3 - 0.05, 0))")
work=$(mktemp -d)
trap 'kill "${sim:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
taskset -c 0 "$root/build/tokenstorm" sim --profile tiny --listen "127.0.0.1:$port" --grace 1s \
    --set b_ms_per_token=0.002 --set k_kv_ms_per_token=0 --set kv_capacity_tokens=2000000000 \
    --set max_num_seqs=16384 --set max_num_batched_tokens=65536 --set "t_w_ms=$step" \
    >"$work/sim.log" 2>&1 &
sim=$!
sleep 0.7
case "$client" in
ts) taskset -c 1 "$ts" run --target "http://127.0.0.1:$port" --workers 1 --concurrency "$streams" \
        --duration 14s --output-len fixed:500 --input-len fixed:1 --drain 2s --out "$work/out" -q \
        ${TS_ARGS:-} >/dev/null 2>&1 & ;;
sse) # shellcheck disable=SC2086
    taskset -c 1 "$sseload" --port "$port" --streams "$streams" --warmup 0 --duration 14 \
        --max-tokens 500 --ramp-timeout 30 ${SSELOAD_ARGS:-} >/dev/null 2>&1 & ;;
*) echo "perf_ab.sh: CLIENT is ts or sse" >&2; exit 2 ;;
esac
cli=$!
sleep 4
perf stat -e ${PERF_EVENTS:-task-clock,context-switches,raw_syscalls:sys_enter} -p "$cli" -- sleep 6 2>&1 |
    grep -E "${PERF_GREP:-task-clock|context-switches|sys_enter}"
wait "$cli" || true
