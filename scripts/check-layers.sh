#!/usr/bin/env bash
# make test: every #include "DIR/..." in src/ names a folder at or below the
# including file's own in src/layers.txt, every source file is compiled
# into its own folder's library, and no library file reaches another
# folder by a relative path. Prints each breach as file:line and fails.
set -uo pipefail
cd "$(dirname "$0")/.."
mapfile -t layers < <(grep -v '^#' src/layers.txt | grep .)
declare -A rank
for i in "${!layers[@]}"; do rank[${layers[$i]}]=$i; done # 0 = top
bad=0
for dir in "${layers[@]}"; do
    [ -d "src/$dir" ] || { echo "src/layers.txt: no folder src/$dir"; bad=1; continue; }
    while IFS=: read -r file line inc; do
        path=${inc#*\"}
        path=${path%%\"*}
        to=$path
        to=${to%%/*}
        if [ -z "${rank[$to]+x}" ]; then
            echo "$file:$line: includes \"$path\" from src/$to, a folder that is not a layer"
            bad=1
        elif [ "${rank[$to]}" -lt "${rank[$dir]}" ]; then
            echo "$file:$line: $dir includes $path from the higher layer $to (src/layers.txt)"
            bad=1
        fi
    done < <(grep -nE '^#[[:space:]]*include[[:space:]]+"[^"]*/' src/"$dir"/*.[ch] /dev/null)
    if grep -nE "'\.\./|\"\.\./" "src/$dir/meson.build"; then
        echo "src/$dir/meson.build: compiles a file of another folder"
        bad=1
    fi
done
for d in src/*/; do
    d=${d#src/}
    d=${d%/}
    [ -n "${rank[$d]+x}" ] || { echo "src/$d: a folder that src/layers.txt does not list"; bad=1; }
done
[ $bad -eq 0 ] && echo "layers: every include in src/ looks down (${#layers[@]} layers)"
exit $bad
