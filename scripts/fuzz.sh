#!/usr/bin/env bash
# Builds the libFuzzer drivers with clang and runs each one:
#   smoke  - a few seconds each (part of make test)
#   long   - FUZZ_SECONDS each (default 300; make fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-smoke}
case "$mode" in
smoke) secs=${FUZZ_SECONDS:-5}; seed=${FUZZ_SEED:-1} ;; # fixed: the same mutations in every make test
long) secs=${FUZZ_SECONDS:-300}; seed=${FUZZ_SEED:-0} ;;  # 0: libFuzzer picks one
*) echo "usage: fuzz.sh smoke|long" >&2; exit 2 ;;
esac
dir=build-fuzz
if [ ! -f "$dir/build.ninja" ]; then
    # FAISS stays out: its static C++ library is not built for the fuzzer runtime
    CC=clang CXX=clang++ meson setup "$dir" -Dfuzz=true -Dfaiss=disabled -Dsimdjson=enabled \
        -Db_sanitize=address,undefined \
        -Db_lundef=false >/dev/null
fi
ninja -C "$dir"
# third-party leaks the drivers cannot avoid (see the file)
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$PWD/tests/fuzz/lsan.supp"
shopt -s nullglob
drivers=()
for f in "$dir"/tests/fuzz/fuzz_*; do
    [ -f "$f" ] && [ -x "$f" ] && drivers+=("$f")
done
if [ ${#drivers[@]} -eq 0 ]; then
    echo "fuzz.sh: no fuzz drivers built yet"
    exit 0
fi
mkdir -p tests/fuzz/artifacts
# one driver: its corpus copied to a scratch directory, its output kept
# until it ends (drivers run side by side in smoke mode)
run_one() {
    local drv=$1 name work out rc
    name=$(basename "$drv")
    name=${name#fuzz_}
    work=$(mktemp -d)
    out=$(mktemp)
    [ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name"/. "$work"/
    # chunk_diff: past simdjson's 64 KiB, where the fast path falls back to yajl
    local max_len=65536
    [ "$name" = chunk_diff ] && max_len=70000
    "$drv" -max_total_time="$secs" -seed="$seed" -max_len="$max_len" -artifact_prefix=tests/fuzz/artifacts/ \
        -print_final_stats=0 "$work" >"$out" 2>&1
    rc=$?
    { echo "fuzz: $name for ${secs}s"; tail -n 3 "$out"; }
    rm -rf "$work" "$out"
    [ "$rc" -eq 0 ] || { echo "fuzz: $name failed (rc $rc)"; return 1; }
}
# smoke: as many drivers at once as there are cores (each is one CPU-bound
# process); long: one after the other, each with the machine to itself
par=1
[ "$mode" = smoke ] && par=$(nproc 2>/dev/null || echo 2)
failed=0
for drv in "${drivers[@]}"; do
    run_one "$drv" &
    while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do
        wait -n || failed=1
    done
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do
    wait -n || failed=1
done
exit $failed
