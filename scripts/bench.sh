#!/usr/bin/env bash
# make bench: the benchmarks in bench/, one after the other, each bounded in
# time. Each prints its figures and writes bench/out/<name>.json.
#
#   scripts/bench.sh                  all of them
#   scripts/bench.sh fidelity locust  only those (sim_capacity, client_capacity,
#                                     client_ceiling, fidelity, locust, proxy_overhead,
#                                     mirror_overhead,
#                                     sim_published)
#
# Environment: BUILD (build directory, default build), PYTHON (default
# /usr/bin/python3, Debian's, which has python3-locust), BENCH_SIM_CORE /
# BENCH_CLIENT_CORE (defaults 0 and 1), BENCH_QUIET_WAIT (seconds to wait for
# other work on those cores to settle before a measurement, default 20).
set -uo pipefail
cd "$(dirname "$0")/.."

export BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
PYTHON=${PYTHON:-/usr/bin/python3}
[ -x "$PYTHON" ] || PYTHON=python3

if [ "$(nproc)" -lt 2 ]; then
    echo "bench.sh: needs 2 cores (simulator and client pinned apart); this machine has $(nproc)" >&2
    exit 2
fi
if [ ! -f "$BUILD/build.ninja" ]; then
    meson setup "$BUILD" >/dev/null || exit 1
fi
ninja -C "$BUILD" tokenstorm src/base/libts_base.a >/dev/null || exit 1
mkdir -p bench/out

all=(sim_capacity client_capacity client_ceiling fidelity locust proxy_overhead mirror_overhead vector_nprobe sim_published realtime_vs_sse)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=("${all[@]}")

passed=0
failed=0
failures=()
for name in "${names[@]}"; do
    case "$name" in
    sim_capacity) cmd=("$PYTHON" bench/sim_capacity.py); limit=400 ;;
    client_capacity) cmd=("$PYTHON" bench/client_capacity.py); limit=600 ;;
    client_ceiling) cmd=("$PYTHON" bench/client_ceiling.py); limit=300 ;;
    fidelity) cmd=("$PYTHON" bench/fidelity.py); limit=240 ;;
    locust) cmd=("$PYTHON" bench/locust_compare.py); limit=900 ;;
    proxy_overhead) cmd=("$PYTHON" bench/proxy_overhead.py); limit=1500 ;;
    mirror_overhead) cmd=("$PYTHON" bench/mirror_overhead.py); limit=240 ;;
    vector_nprobe) cmd=("$PYTHON" bench/vector_nprobe.py); limit=600 ;;
    sim_published) cmd=("$PYTHON" bench/sim_published.py); limit=420 ;;
    realtime_vs_sse) cmd=("$PYTHON" bench/realtime_vs_sse.py); limit=240 ;;
    *) echo "bench.sh: unknown benchmark '$name' (${all[*]})" >&2; exit 2 ;;
    esac
    echo "== $name"
    start=$(date +%s)
    if timeout --kill-after=10 "$limit" "${cmd[@]}"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures+=("$name")
    fi
    echo "   ($name took $(($(date +%s) - start)) s)"
done
[ $failed -eq 0 ] || echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
