#!/usr/bin/env python3
"""Writes a C header holding a text file as a string constant:
embed-text.py IN OUT NAME. Used by the build to put helper scripts (the
topology scan) into the binary."""
import sys

src, dst, name = sys.argv[1:4]
with open(src, encoding='utf-8') as f:
    text = f.read()
lines = []
for line in text.splitlines(keepends=True):
    esc = line.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n').replace('\t', '\\t')
    lines.append('    "%s"' % esc)
with open(dst, 'w', encoding='utf-8') as f:
    f.write('/* Generated from %s by scripts/embed-text.py: do not edit. */\n' % src.split('/')[-1])
    f.write('static const char %s[] =\n%s;\n' % (name, '\n'.join(lines) or '""'))
