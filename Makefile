# The front door. Every target installs missing Debian packages first
# (scripts/deps.sh, idempotent) and builds what it needs, so each works alone
# on a fresh Debian 12 machine.
BUILD ?= build
ARGS ?=

.PHONY: all deps build run test test-mpi fuzz bench format format-check clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja:
	meson setup $(BUILD)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

# The main job: a load test against the built-in simulator.
run: build
	./$(BUILD)/tokenstorm run $(ARGS)

# Everything CI runs: normal build + tests, ASan/UBSan build + tests,
# formatting, a short fuzzing pass and the real-client compatibility tests.
test: deps
	scripts/test.sh

# The MPI build alone (installs Open MPI; also a step of `make test`).
test-mpi: deps
	scripts/test-mpi.sh

fuzz: deps
	scripts/fuzz.sh long

bench: deps
	scripts/deps.sh bench
	scripts/bench.sh

FORMAT_DIRS = $(wildcard src tests bench)

format:
	find $(FORMAT_DIRS) -name '*.[ch]' | xargs clang-format -i

format-check:
	find $(FORMAT_DIRS) -name '*.[ch]' | xargs clang-format --dry-run --Werror

clean:
	rm -rf build build-asan build-fuzz build-mpi
