#!/usr/bin/env bash
# make deb: a Debian package of tokenstorm from a build directory configured
# with prefix /usr: the binary, man pages and completions staged by `meson
# install --destdir`, the runtime library dependencies computed by
# dpkg-shlibdeps from the binary (never listed by hand).
#   scripts/deb.sh [BUILD]      -> BUILD/deb/tokenstorm_VERSION_ARCH.deb
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${1:-build}
debbuild="$build-deb" # its own build dir: prefix /usr, not the user's PREFIX
[ -f "$debbuild/build.ninja" ] || meson setup "$debbuild" --prefix=/usr \
    >/dev/null
meson configure "$debbuild" --prefix=/usr >/dev/null
# the binary and what install/meson.build makes (not the tests)
ninja -C "$debbuild" tokenstorm >/dev/null
ninja -C "$debbuild" $(ninja -C "$debbuild" -t targets all | grep -o '^install/[^:]*') >/dev/null

version=$(meson introspect --projectinfo "$debbuild" | sed -n 's/.*"version": *"\([^"]*\)".*/\1/p')
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
meson install -C "$debbuild" --no-rebuild --destdir "$stage/root" >/dev/null
rm -rf "$stage/root/usr/include" "$stage/root/usr/lib" # static libraries of the layers
strip --strip-unneeded "$stage/root/usr/bin/tokenstorm"
gzip -9n "$stage/root/usr/share/man/man1/"*.1

# dpkg-shlibdeps wants a debian/control next to it
mkdir -p "$stage/src/debian"
printf 'Source: tokenstorm\n\nPackage: tokenstorm\nArchitecture: any\n' >"$stage/src/debian/control"
depends=$(cd "$stage/src" && dpkg-shlibdeps -O "$stage/root/usr/bin/tokenstorm" |
    sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
size=$(du -sk "$stage/root" | cut -f1)
mkdir -p "$stage/root/DEBIAN"
cat >"$stage/root/DEBIAN/control" <<CONTROL
Package: tokenstorm
Version: $version
Architecture: $arch
Maintainer: tokenstorm developers <tokenstorm@localhost>
Installed-Size: $size
Depends: $depends
Recommends: man-db
Section: net
Priority: optional
Homepage: https://github.com/tokenstorm/tokenstorm
Description: load, chaos and SLA testing for LLM services
 One C binary that drives OpenAI-compatible chat, completion and embedding
 APIs with realistic streaming traffic and measures what users feel (TTFT,
 ITL, TPOT, E2EL, goodput); a simulator of a continuous-batching GPU server;
 a chaos proxy; sweeps, reports and comparisons.
CONTROL
mkdir -p "$build/deb"
out="$build/deb/tokenstorm_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$stage/root" "$out" >/dev/null
echo "deb.sh: $out"
echo "deb.sh: Depends: $depends"
