#!/usr/bin/env bash
# make deb-test: installs the package make deb built on this machine as a
# user would (dpkg -i, then apt-get -f install for what it depends on), checks
# the installed tool works -- `tokenstorm run --duration 3s` against the
# built-in simulator, `man -w` finds every page, the completions are in
# place -- and removes it again; then `make install DESTDIR=...` and `make
# uninstall` into a staging directory. Needs root (or sudo) and apt.
#   scripts/deb-test.sh [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
deb=$(ls -t "$build"/deb/tokenstorm_*.deb | head -1)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if dpkg-query -W -f='${Status}' tokenstorm 2>/dev/null | grep -q 'install ok installed'; then
    echo "deb-test: a tokenstorm package is installed already; not touching it" >&2
    exit 1
fi
cleanup() { $sudo dpkg -r tokenstorm >/dev/null 2>&1 || true; }
trap cleanup EXIT
$sudo dpkg -i "$deb" >/dev/null || $sudo apt-get install -f -y -qq >/dev/null
dpkg-query -W -f='${Status}\n' tokenstorm | grep -q 'install ok installed'

fail=0
check() { # what, command...
    local what=$1
    shift
    if "$@" >/tmp/deb-test.$$ 2>&1; then
        echo "deb-test: ok: $what"
    else
        echo "deb-test: FAILED: $what"; tail -20 /tmp/deb-test.$$; fail=1
    fi
    rm -f /tmp/deb-test.$$
}
out=$(mktemp -d)
check "/usr/bin/tokenstorm run --duration 3s" \
    /usr/bin/tokenstorm run --duration 3s --quiet --out "$out/run"
check "the run wrote result.json" test -s "$out/run/result.json"
rm -rf "$out"
check "man -w tokenstorm" man -w tokenstorm
for c in $(/usr/bin/tokenstorm --help | awk '/^commands:/ {on=1; next} on && /^  [a-z]/ {print $1} on && /^$/ {exit}'); do
    check "man -w tokenstorm-$c" man -w "tokenstorm-$c"
done
check "bash completion" test -s /usr/share/bash-completion/completions/tokenstorm
check "zsh completion" test -s /usr/share/zsh/vendor-completions/_tokenstorm
check "fish completion" test -s /usr/share/fish/vendor_completions.d/tokenstorm.fish
check "tokenstorm --version" /usr/bin/tokenstorm --version

# make install / make uninstall into a staging DESTDIR (the package's build dir)
stage=$(mktemp -d)
make -s install BUILD="$build-deb" PREFIX=/usr DESTDIR="$stage" >/dev/null
check "make install: the binary" test -x "$stage/usr/bin/tokenstorm"
check "make install: a man page per command" \
    test "$(ls "$stage/usr/share/man/man1" | wc -l)" -eq "$(ls /usr/share/man/man1/tokenstorm*.1.gz | wc -l)"
check "make install: bash completion" test -s "$stage/usr/share/bash-completion/completions/tokenstorm"
make -s uninstall BUILD="$build-deb" >/dev/null
check "make uninstall removes every file" test -z "$(find "$stage" -type f)"
rm -rf "$stage"
exit $fail
