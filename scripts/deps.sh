#!/usr/bin/env bash
# Installs the Debian packages tokenstorm builds and tests with, only those
# that are missing. Idempotent; safe to run before every make target.
set -euo pipefail

pkgs=(
    gcc make meson ninja-build pkg-config
    libuv1-dev libcurl4-openssl-dev libhttp-parser-dev libjansson-dev
    libfyaml-dev libssl-dev libpcre2-dev zlib1g-dev libcmocka-dev
    # the stream chunk decoder's fast path: a callback JSON parser, no DOM per event
    libyajl-dev
    clang libclang-rt-14-dev clang-format curl
    # WebSocket framing for the realtime endpoint (sim, run, proxy): no hand-written frame parser
    libwslay-dev
    # a self-signed certificate for the wss:// test (tests/compat/realtime_integrity.test.mjs)
    openssl
    # function lengths for scripts/check-functions.sh
    universal-ctags
    # a real Prometheus server for tests/integration/prometheus.test.mjs
    prometheus
    # the simulator's real ANN indexes (optional in the build: sim/ann_faiss.cpp)
    libfaiss-dev g++
    # pgvector targets of run --endpoint vector-search (optional: app/run_pg.c)
    libpq-dev
    # headless rendering of the HTML report in tests/integration/report.test.mjs
    chromium fonts-dejavu-core
    # topology --source parses Python with python3's ast module (also embeds the helper at build)
    python3
)
# Extra groups: `scripts/deps.sh bench` adds what the benchmarks compare with.
for group in "$@"; do
    case "$group" in
    bench) pkgs+=(python3 python3-locust) ;;
    mpi) pkgs+=(libopenmpi-dev openmpi-bin) ;;
    *) echo "deps.sh: unknown group '$group'" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    missing+=(nodejs npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
