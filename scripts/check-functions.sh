#!/usr/bin/env bash
# make test: no function in src/ is longer than MAX lines (default 120),
# counted by universal-ctags from its first line to its closing brace.
# Tables (static arrays) are not functions and are not counted. Prints the
# longest functions, and fails naming every one over the bound.
set -uo pipefail
cd "$(dirname "$0")/.."
max=${1:-120}
ctags=ctags-universal # Debian's name; plain ctags may be another program
command -v "$ctags" >/dev/null 2>&1 || ctags=ctags
if ! "$ctags" --version 2>/dev/null | grep -q 'Universal Ctags'; then
    echo "check-functions: needs universal-ctags (scripts/deps.sh installs it)" >&2
    exit 1
fi
list=$("$ctags" -x --languages=C --kinds-C=f --fields=+ne --_xformat='%N %F %n %{end}' \
    $(git ls-files 'src/*.c' 'src/*.h') | awk '$4 > 0 {print $4 - $3 + 1, $2 ":" $3, $1}' |
    sort -rn)
[ -n "$list" ] || { echo "check-functions: ctags found no function" >&2; exit 1; }
echo "longest functions in src/ (lines, place, name):"
echo "$list" | head -5 | sed 's/^/  /'
over=$(echo "$list" | awk -v m="$max" '$1 > m')
if [ -n "$over" ]; then
    echo "functions over $max lines (split them into named steps):"
    echo "$over" | sed 's/^/  /'
    exit 1
fi
echo "functions: none over $max lines ($(echo "$list" | wc -l) functions)"
