#!/usr/bin/env bash
# Writes the man page of tokenstorm (COMMAND "-") or of one of its commands
# with help2man, from the binary's own --help and --version, so the pages
# never drift from the help. The one-line summary is the command's line in
# `tokenstorm --help`. Used by meson at build time (install/meson.build):
#   scripts/man.sh BIN COMMAND OUT      (COMMAND "-": the page of tokenstorm)
set -euo pipefail
bin=$(realpath "$1")
cmd=$2
out=$3
if [ "$cmd" = "-" ]; then
    summary="load, chaos and SLA testing for LLM services"
else
    summary=$("$bin" --help | awk -v c="$cmd" '$1 == c { sub(/^ *[^ ]+ +/, ""); print; exit }')
    [ -n "$summary" ] || { echo "man.sh: '$cmd' is not in 'tokenstorm --help'" >&2; exit 1; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$cmd" = "-" ]; then
    name=tokenstorm
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$bin" >"$tmp/$name"
else
    # help2man names the page after the program: tokenstorm-run(1)
    name=tokenstorm-$cmd
    printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$bin" "$cmd" >"$tmp/$name"
fi
chmod +x "$tmp/$name"
help2man --no-info --no-discard-stderr --section=1 --source="tokenstorm" \
    --manual="tokenstorm manual" --name="$summary" --output="$out" "$tmp/$name"
# help2man takes the name from `--version` ("tokenstorm 0.1.0"): the page of
# a command is tokenstorm-COMMAND, in its title and NAME line
if [ "$cmd" != "-" ]; then
    upper=$(echo "$name" | tr 'a-z' 'A-Z')
    sed -i -e "s/^\.TH TOKENSTORM /.TH $upper /" \
        -e "s/^tokenstorm \\\\- /tokenstorm\\\\-$cmd \\\\- /" "$out"
fi
