#!/usr/bin/env bash
# Installs the Debian packages tokenstorm needs, only those that are missing.
# Idempotent; safe to run before every make target. With no group: what
# building and running need (`make run`, `make install`); the groups add
# what only tests, packaging or benchmarks use:
#   scripts/deps.sh [test] [deb] [bench] [mpi]
#   scripts/deps.sh --list [GROUP...]   print the packages, install nothing
set -euo pipefail

pkgs=(
    gcc make meson ninja-build pkg-config
    libuv1-dev libcurl4-openssl-dev libhttp-parser-dev libjansson-dev
    libfyaml-dev libssl-dev libpcre2-dev zlib1g-dev
    # the stream chunk decoder's fast path: a callback JSON parser, no DOM per event
    libyajl-dev
    # ...parsed by simdjson (C++, validating, about twice yajl's speed per chunk),
    # replayed as yajl's callbacks (optional in the build: llm/json_simd.cpp)
    libsimdjson-dev
    # io_uring for the proxy's sends to clients: one system call per batch of
    # streams instead of one write(2) per event (optional in the build: net/uring.c)
    liburing-dev
    # WebSocket framing for the realtime endpoint (sim, run, proxy): no hand-written frame parser
    libwslay-dev
    # the simulator's real ANN indexes (optional in the build: sim/ann_faiss.cpp)
    libfaiss-dev g++
    # pgvector targets of run --endpoint vector-search (optional: app/run_pg.c)
    libpq-dev
    # man pages generated from --help at build time (install/meson.build)
    help2man
    # topology --source parses Python with python3's ast module (also embeds the helper at build)
    python3
)
list=0
node=0
for group in "$@"; do
    case "$group" in
    --list) list=1 ;;
    # unit tests, sanitizers, fuzzing, format and function-length checks,
    # and the real peers the integration tests run against
    test)
        pkgs+=(libcmocka-dev clang libclang-rt-14-dev clang-format curl universal-ctags
            # a real Prometheus server for tests/integration/prometheus.test.mjs
            prometheus
            # headless rendering of the HTML report in tests/integration/report.test.mjs
            chromium fonts-dejavu-core
            # a self-signed certificate for the wss:// test (tests/compat/realtime_integrity.test.mjs)
            openssl
            # the shells whose generated completions tests/integration/cli.test.mjs runs
            zsh fish
            # a real retrying gateway between two proxies (tests/integration/chain_gateway.test.mjs)
            nginx)
        node=1 ;;
    # make deb: dpkg-shlibdeps finds the runtime dependencies; man-db for `man -w`
    deb) pkgs+=(dpkg-dev man-db) ;;
    # nginx: the peer relay bench/proxy_overhead.py measures the proxy against
    bench) pkgs+=(python3 python3-locust nginx) ;;
    mpi) pkgs+=(libopenmpi-dev openmpi-bin) ;;
    *) echo "deps.sh: unknown group '$group' (test, deb, bench, mpi)" >&2; exit 2 ;;
    esac
done
if [ $list -eq 1 ]; then
    printf '%s\n' "${pkgs[@]}"
    [ $node -eq 0 ] || printf '%s\n' nodejs npm
    exit 0
fi

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ $node -eq 1 ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
    missing+=(nodejs npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
