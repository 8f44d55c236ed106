// The command line every command shares (src/cmd/cmd_opts.c): one-line
// errors with a did-you-mean from the command's own option table, the sweep's
// hint for run options, values that cannot be meant refused, -h/--help/
// --version and `help COMMAND` everywhere, hidden aliases, completions made
// from the option tables, paths printed without double slashes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, runBin, startSim } from './lib.mjs';

const ts = (args) => runBin(args, { timeoutMs: 30000 });
const commands = () => [...spawnSync(BIN, ['--help'], { encoding: 'utf8' }).stdout.matchAll(/^ {2}([a-z]+) {2,}/gm)].map((m) => m[1]);

test('a misspelled option: one line, the nearest option, where the help is', async () => {
  const r = await ts(['run', '--concurrancy', '8']);
  assert.equal(r.code, 2);
  assert.equal(r.stderr, "tokenstorm run: unknown option '--concurrancy' (did you mean '--concurrency'?); see 'tokenstorm run --help'\n");
  const a = await ts(['run', '--co', '3']);
  assert.match(a.stderr, /^tokenstorm run: option '--co' is ambiguous \(--concurrency, --consistency\)/);
  assert.match((await ts(['run', '--rate'])).stderr, /^tokenstorm run: option '--rate' needs a value; see/);
  assert.match((await ts(['run', '--json=1'])).stderr, /option '--json' takes no value/);
  assert.match((await ts(['run', '-rate', '3'])).stderr, /unknown option '-r' \(did you mean '--rate'\?\)/);
  assert.match((await ts(['rnu'])).stderr, /^tokenstorm: unknown command 'rnu' \(did you mean 'run'\?\)/);
  // the hidden alias leads to the name in the help
  assert.match((await ts(['proxy', '--conect-timeout', '1s'])).stderr, /did you mean '--timeout-connect'/);
});

test('sweep: a run option before `--` says where it goes', async () => {
  const r = await ts(['sweep', '--rates', '1,2', '--duration', '5s']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^tokenstorm sweep: '--duration' is a run option: put it after `--`/);
  assert.match((await ts(['sweep', '--rates', '1', '--duratoin', '5s'])).stderr, /did you mean the run option '--duration', after `--`/);
});

test('values that cannot be meant are refused', async () => {
  for (const [args, msg] of [[['--rate', '0'], /--rate: must be more than 0/], [['--requests', '0'], /--requests: must be 1 or more/],
    [['--duration', '0s'], /--duration: must be longer than 0/], [['--timeout-connect', '0'], /--timeout-connect: must be longer than 0/]]) {
    const r = await ts(['run', ...args]);
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.stderr, msg);
  }
});

test('every command: -h, --help with examples, --version, help COMMAND, a bad option in one line', async () => {
  const cmds = commands();
  assert.ok(cmds.includes('proxy') && cmds.includes('chaos') && cmds.includes('completion'));
  const version = (await ts(['--version'])).stdout;
  for (const c of cmds) {
    const h = await ts([c, '--help']);
    assert.equal(h.code, 0, c);
    assert.match(h.stdout, /\nexamples[^\n]*:\n {2}\S/, `${c} --help has examples`);
    assert.equal((await ts([c, '-h'])).stdout, h.stdout, `${c} -h`);
    assert.equal((await ts(['help', c])).stdout, h.stdout, `help ${c}`);
    const v = await ts([c, '--version']);
    assert.equal(v.code, 0, `${c} --version`);
    assert.equal(v.stdout, version);
    if (['help', 'completion', 'version'].includes(c)) continue;
    const b = await ts([c, '--no-such-option']);
    assert.equal(b.code, 2, c);
    assert.equal(b.stderr.split('\n').length, 2, `${c}: one line: ${b.stderr}`);
    assert.match(b.stderr, new RegExp(`^tokenstorm ${c}: unknown option '--no-such-option'; see 'tokenstorm ${c} --help'`));
  }
  assert.match((await ts(['run', '--help'])).stdout, /default: open loop, Poisson arrivals, 10 requests\/s/);
});

// Every option that takes a value says its default (or that it is required,
// repeatable, or has none) in its --help paragraph or its section's heading.
test('every default is stated', async () => {
  const missing = [];
  for (const c of commands()) {
    let cur = null;
    let heading = '';
    for (const l of (await ts([c, '--help'])).stdout.split('\n')) {
      const m = l.match(/^ {2}(?:-[a-z], )?(--[a-z0-9-]+)([ =[])(\S*)/);
      if (/^\S.*:$/.test(l)) heading = l;
      if (m) {
        if (cur) check(cur);
        cur = { opt: m[1], arg: m[2] !== ' ' || /^[A-Z[']/.test(m[3]), text: heading + ' ' + l };
      } else if (cur && /^ {6,}/.test(l)) cur.text += ' ' + l.trim();
      else if (cur) { check(cur); cur = null; }
    }
    if (cur) check(cur);
    function check(p) { if (p.arg && !/default|required|repeatable|none/i.test(p.text)) missing.push(`${c} ${p.opt}`); }
  }
  assert.deepEqual(missing, []);
});

test('hidden aliases work and stay hidden', async () => {
  const r = await ts(['proxy', '--connect-timeout', '2s', '--check']);
  assert.equal(r.code, 0, r.stderr);
  const s = await ts(['sim', '--output-len', 'fixed:5', '--list-profiles']);
  assert.equal(s.code, 0, s.stderr);
  assert.doesNotMatch((await ts(['proxy', '--help'])).stdout, /--connect-timeout/);
});

test('completions come from the option tables: bash completes them, aliases left out', async () => {
  const bash = (await ts(['completion', 'bash'])).stdout;
  const run = (words) => spawnSync('bash', ['-c', `${bash}\nCOMP_WORDS=(${words}); COMP_CWORD=$((\${#COMP_WORDS[@]}-1)); _tokenstorm; printf '%s\\n' "\${COMPREPLY[@]}"`], { encoding: 'utf8' }).stdout.split('\n');
  assert.ok(run('tokenstorm run --conc').includes('--concurrency'));
  assert.ok(run('tokenstorm sw').includes('sweep'));
  assert.ok(run('tokenstorm proxy --time').includes('--timeout-connect'));
  assert.ok(!run('tokenstorm proxy --conn').includes('--connect-timeout'));
  const help = (await ts(['run', '--help'])).stdout;
  for (const m of help.matchAll(/^ {2}(?:-[a-z], )?(--[a-z0-9-]+)/gm)) assert.match(bash, new RegExp(`opts='(.* )?${m[1]}[ ']`), m[1]);
  assert.match((await ts(['completion', 'zsh'])).stdout, /'\*--concurrency=:value:_files'/);
  assert.match((await ts(['completion', 'fish'])).stdout, /from run' -l concurrency -r/);
  assert.equal((await ts(['completion', 'tcsh'])).code, 2);
});

// zsh and fish come with `scripts/deps.sh test`; without them these checks are skipped
const has = (p) => spawnSync('sh', ['-c', `command -v ${p}`]).status === 0;
test('fish completes from the generated script', { skip: !has('fish') }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-fish-'));
  try {
    fs.writeFileSync(path.join(dir, 't.fish'), (await ts(['completion', 'fish'])).stdout);
    const r = spawnSync('fish', ['--no-config', '-c', `source ${dir}/t.fish; complete -C 'tokenstorm run --conc'; complete -C 'tokenstorm sw'; complete -C 'tokenstorm proxy --conn'`], { encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 0, r.stderr);
    const out = r.stdout.split('\n').map((l) => l.split('\t')[0]);
    assert.ok(out.includes('--concurrency') && out.includes('sweep'), r.stdout);
    assert.ok(!out.includes('--connect-timeout'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the zsh script parses', { skip: !has('zsh') }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-zsh-'));
  try {
    fs.writeFileSync(path.join(dir, '_tokenstorm'), (await ts(['completion', 'zsh'])).stdout);
    const r = spawnSync('zsh', ['-n', path.join(dir, '_tokenstorm')], { encoding: 'utf8', timeout: 20000 });
    assert.equal(r.status, 0, r.stderr);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// install/meson.build makes them next to the binary with help2man, from --help
const manDir = path.join(path.dirname(BIN), 'install');
test('a man page per command, made from its --help', { skip: !fs.existsSync(path.join(manDir, 'tokenstorm.1')) }, async () => {
  for (const c of commands()) {
    const page = fs.readFileSync(path.join(manDir, `tokenstorm-${c}.1`), 'utf8');
    assert.match(page, new RegExp(`^\\.TH TOKENSTORM-${c.toUpperCase()} "1"`, 'm'));
    const help = (await ts([c, '--help'])).stdout;
    for (const m of help.matchAll(/^ {2}(?:-[a-z], )?--([a-z0-9-]+)/gm))
      assert.ok(page.includes(`\\-\\-${m[1].replace(/-/g, "\\-")}`), `tokenstorm-${c}.1 lacks --${m[1]}`);
  }
});

test('paths are printed without double slashes', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-cli-'));
  try {
    const r = await ts(['run', '--sim-profile', 'tiny', '--rate', '5', '--duration', '1s', '--out', dir + '//out/']);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout + r.stderr, /[^:]\/\//);
    assert.match(r.stdout, /results: .*\/out\/\n/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('make run installs only what building and running need', () => {
  const deps = new URL('../../scripts/deps.sh', import.meta.url).pathname;
  const base = spawnSync(deps, ['--list'], { encoding: 'utf8' }).stdout.split('\n');
  for (const p of ['clang', 'chromium', 'prometheus', 'nodejs', 'libcmocka-dev']) assert.ok(!base.includes(p), p);
  assert.ok(base.includes('help2man') && base.includes('libuv1-dev'));
  const t = spawnSync(deps, ['--list', 'test'], { encoding: 'utf8' }).stdout.split('\n');
  for (const p of ['clang', 'chromium', 'prometheus', 'nodejs']) assert.ok(t.includes(p), p);
});

test('log lines name the program and the command', async () => {
  const sim = await startSim();
  await sim.stop('SIGTERM');
  assert.match(sim.stderr, /^tokenstorm sim: info: /m);
  assert.doesNotMatch(sim.stderr, /^tokenstorm: /m);
});

test('run: a header before the progress: target, load, length, results; sent/N without a terminal too', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-cli-'));
  try {
    const r = await ts(['run', '--sim-profile', 'tiny', '--rate', '20', '--requests', '10', '--out', path.join(dir, 'o')]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stderr.split('\n');
    assert.match(lines[0], /^tokenstorm run: target http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions \(built-in simulator, tiny\), model \S+, endpoint chat$/);
    assert.equal(lines[1], 'tokenstorm run: load open loop, poisson arrivals, 20 req/s, 10 requests');
    assert.equal(lines[2], `tokenstorm run: results in ${path.join(dir, 'o')}/`);
    assert.doesNotMatch(r.stderr, /TTFT p50 0 ms/);
    const q = await ts(['run', '--sim-profile', 'tiny', '--rate', '20', '--requests', '5', '-q', '--out', path.join(dir, 'q')]);
    assert.equal(q.stderr, '');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('report -o says what it wrote; merge -q keeps the summary', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-cli-'));
  try {
    const r0 = await ts(['run', '--sim-profile', 'tiny', '--rate', '20', '--requests', '5', '-q', '--out', path.join(dir, 'run')]);
    assert.equal(r0.code, 0, r0.stderr);
    const h = await ts(['report', '--format', 'html', '-o', path.join(dir, 'r.html'), path.join(dir, 'run')]);
    assert.equal(h.code, 0, h.stderr);
    const size = fs.statSync(path.join(dir, 'r.html')).size;
    assert.equal(h.stderr, `tokenstorm report: wrote ${path.join(dir, 'r.html')} (${size} bytes)\n`);
    // -q keeps the result and drops status lines, in merge as in run
    const r1 = await ts(['run', '--sim-profile', 'tiny', '--rate', '20', '--requests', '5', '-q', '--out', path.join(dir, 'run2')]);
    assert.equal(r1.code, 0, r1.stderr);
    const m = await ts(['merge', '-q', '--out', path.join(dir, 'm'), path.join(dir, 'run'), path.join(dir, 'run2')]);
    assert.equal(m.code, 0, m.stderr);
    assert.match(m.stdout, /^requests {6}10 sent/m);
    assert.doesNotMatch(m.stdout, /merged 2 runs/);
    const c = await ts(['report', '--format', 'csv', '-o', path.join(dir, 'x'), path.join(dir, 'run')]);
    for (const f of ['x_stats.csv', 'x_ttft_stats.csv', 'x_timeline.csv']) assert.match(c.stderr, new RegExp(`wrote ${path.join(dir, f)} \\(\\d+ bytes\\)`));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
