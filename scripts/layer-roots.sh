#!/bin/sh
# meson setup: makes OUT/<layer>/ for every layer of src/layers.txt, holding
# links to that layer's folder and to the folders below it, and nothing else.
# Each library compiles with -I OUT/<layer>, so including a header of a
# higher layer fails to compile (DESIGN.md "Layout").
set -eu
src=$1
out=$2
layers=$(grep -v '^#' "$src/layers.txt" | grep .)
rm -rf "$out"
below=""
for l in $(printf '%s\n' $layers | tac); do
    below="$l $below"
    mkdir -p "$out/$l"
    for b in $below; do
        ln -s "$src/$b" "$out/$l/$b"
    done
done
