#!/usr/bin/env bash
# make test-mpi (and one step of make test): the optional MPI build
# (meson -Dmpi=enabled) with Open MPI from Debian, and the tests that need
# it: the shard unit tests and tests/integration/distributed.test.mjs, whose
# mpirun -n 2 case is skipped in builds without MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${MPI_BUILD:-build-mpi}
scripts/deps.sh mpi
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dmpi=enabled >/dev/null
fi
ninja -C "$dir" tokenstorm tests/unit/test_shard
meson test -C "$dir" --no-rebuild --print-errorlogs shard integration-distributed
