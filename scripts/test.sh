#!/usr/bin/env bash
# make test: every test CI runs. Prints one closing line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
passed=0
failed=0
failures=()

step() { # name, command...
    local name=$1
    shift
    echo "== $name"
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures+=("$name")
    fi
}

meson_suite() { # build dir, extra setup args...
    local dir=$1
    shift
    if [ ! -f "$dir/build.ninja" ]; then
        local log
        log=$(meson setup "$dir" "$@" 2>&1) || { echo "$log" | tail -20; return 1; }
    fi
    ninja -C "$dir" || return 1
    # one more test process than cores: the integration tests mostly wait on
    # the binaries they start (a whole suite uses ~20% of two cores)
    meson test -C "$dir" --print-errorlogs --num-processes "$((jobs + 1))"
}

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
step "build and tests" meson_suite build
step "tests under ASan+UBSan" meson_suite build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
# The MPI build (distributed runs): Open MPI from Debian (~20 s to install)
# and one more build of the binary (~40 s on 2 cores) for two test programs
# (~20 s) -- cheap enough to run every time; `make test-mpi` runs it alone.
step "MPI build and distributed tests" scripts/test-mpi.sh
step "format check" make -s format-check
step "layering check" scripts/check-layers.sh
step "function length check" scripts/check-functions.sh
step "fuzz smoke" scripts/fuzz.sh smoke
if [ -f tests/compat/run.sh ]; then
    step "openai client compatibility" tests/compat/run.sh build/tokenstorm
fi

echo
if [ $failed -gt 0 ]; then
    echo "failed steps: ${failures[*]}"
fi
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
