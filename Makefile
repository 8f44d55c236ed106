# The front door. Every target installs missing Debian packages first
# (scripts/deps.sh, idempotent: `make run` and `make install` only what
# building and running need; tests, packaging and benchmarks add theirs) and
# builds what it needs, so each works alone on a fresh Debian 12 machine.
BUILD ?= build
ARGS ?=
# make install PREFIX=/usr/local DESTDIR=/tmp/stage (meson install underneath)
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all deps build run install uninstall deb deb-test test test-mpi fuzz bench format \
	format-check clean

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

# The binary, a man page per command and bash/zsh/fish completions under
# PREFIX (staged under DESTDIR when given). The build directory keeps the
# prefix it was configured with last.
install: build
	meson configure $(BUILD) --prefix=$(PREFIX) >/dev/null
	ninja -C $(BUILD)
	meson install -C $(BUILD) --no-rebuild $(if $(DESTDIR),--destdir $(DESTDIR))

uninstall:
	ninja -C $(BUILD) uninstall

# A Debian package in $(BUILD)/deb/, runtime dependencies from dpkg-shlibdeps.
deb: deps
	scripts/deps.sh deb
	scripts/deb.sh $(BUILD)

# Installs that package on this machine (root; dpkg -i, apt-get -f install),
# runs `tokenstorm run --duration 3s` and `man -w tokenstorm`, removes it.
deb-test: deb
	scripts/deb-test.sh $(BUILD)

# Everything CI runs: normal build + tests, ASan/UBSan build + tests,
# formatting, a short fuzzing pass and the real-client compatibility tests.
test: deps
	scripts/deps.sh test
	scripts/test.sh

# The MPI build alone (installs Open MPI; also a step of `make test`).
test-mpi: deps
	scripts/test-mpi.sh

fuzz: deps
	scripts/deps.sh test
	scripts/fuzz.sh long

bench: deps
	scripts/deps.sh bench
	scripts/bench.sh

FORMAT_DIRS = $(wildcard src tests bench)

format:
	find $(FORMAT_DIRS) -name '*.[ch]' | xargs clang-format -i

format-check:
	@scripts/deps.sh test
	find $(FORMAT_DIRS) -name '*.[ch]' | xargs clang-format --dry-run --Werror

clean:
	rm -rf build build-asan build-fuzz build-mpi build-deb
