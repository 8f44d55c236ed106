// Every command line a user reads runs as printed: the `tokenstorm ...` and
// `curl ...` lines of README.md and docs/*.md code blocks, and the examples
// of every command's --help, run against the simulator (and a proxy in front
// of it) with these stated overrides so the whole set takes about a minute
// (each code block in its own directory, its lines in order, so a line reads
// what the lines above it wrote; `> FILE` is kept):
//   any host on :8000 -> the simulator (serving a small raw-vector corpus
//   too), :9000 / :9001 -> the proxy and its API;
//   --duration 1s (added to runs that give none), --requests 8,
//   --stages 1s:5, sweeps at most 3 steps of two loads, chaos with --check,
//   listeners on port 0, --listen-for 1s; sim and proxy lines count as run
//   when they listen; the user's files: ./app is the topology fixture app,
//   rec/ a recording of three requests (tests/fixtures/recording),
//   traces.jsonl an empty OTLP/JSON export;
//   runs and sweeps without --out get one (out-N);
//   result directories a line reads (report, compare, merge) are copies of
//   one short run. Exit 0 or 1 (an SLO verdict) passes; 2 or 3 fails.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, runBin, startSim, startServer } from './lib.mjs';

const root = new URL('../../', import.meta.url).pathname;
// Names the docs use for the user's own files, and what stands in for them
// when the repository ships one.
// (rec/ is copied: a line of its block records into it)
const fixtures = [['app', path.join(root, 'tests/fixtures/topology/ragapp')],
  ['rec', path.join(root, 'tests/fixtures/recording/rec'), 'copy']];

// The command lines of each fenced code block (lines starting with
// `tokenstorm ` or `curl `, backslash continuations joined; outputs quoted in
// docs, "tokenstorm run: ...", left out): one array per block that has any.
export function extractBlocks(text) {
  const out = [];
  for (const m of text.matchAll(/```[a-z]*\n([\s\S]*?)```/g)) {
    const lines = commandLines(m[1].split('\n'));
    if (lines.length) out.push(lines);
  }
  return out;
}

function commandLines(lines) {
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    const prompt = lines[i].trim().startsWith('$ ');
    let l = lines[i].trim().replace(/^\$ /, '');
    if (!/^(tokenstorm|curl) /.test(l) || /^tokenstorm [a-z]+: /.test(l)) continue;
    while (l.endsWith('\\') && i + 1 < lines.length) l = l.slice(0, -1) + ' ' + lines[++i].trim();
    // "$ command" followed by its error message: shown to fail, with that message
    const next = (lines[i + 1] || '').trim();
    out.push(prompt && /^tokenstorm [a-z]+: /.test(next) ? { line: l, error: next } : l);
  }
  return out;
}

// The examples: section of a --help text.
function helpExamples(help) {
  const m = help.match(/\nexamples[^\n]*:\n([\s\S]*?)(\n\n|$)/);
  return m ? commandLines(m[1].split('\n')) : [];
}

// argv of a line as bash splits it in cwd (quotes, globs; unset $VARS are
// empty), without a trailing `&`, `| ...` or `> file`; paths under /shared/
// (a shared volume in the docs) made relative.
function split(line, cwd) {
  const cmd = line.replace(/<([a-z-]+)>/g, '$1').replace(/ \/shared\//g, ' shared/').replace(/\s+#\s[^'"]*$/, '').replace(/\s*&\s*$/, '').replace(/\s+\|\s+.*$/, '').replace(/\s+>\s+[^'"]*$/, '');
  const redirect = line.replace(/\s+#\s[^'"]*$/, '').match(/\s>\s+(\S+)\s*$/);
  const r = spawnSync('bash', ['-c', `printf '%s\\0' ${cmd}`], { encoding: 'utf8', timeout: 5000, cwd });
  assert.equal(r.status, 0, `bash cannot split: ${line}`);
  const argv = r.stdout.split('\0').slice(0, -1);
  argv.redirect = redirect ? redirect[1] : null; // `> FILE`: the line's stdout goes there
  return argv;
}

const argOpts = {}; // command -> options taking a value, from the generated bash completion
function loadArgOpts() {
  const s = spawnSync(BIN, ['completion', 'bash'], { encoding: 'utf8' }).stdout;
  for (const m of s.matchAll(/\n {4}([a-z]+)\)\n {8}opts='[^']*'\n {8}argopts='([^']*)'/g)) argOpts[m[1]] = new Set(m[2].split(' '));
}

let outSeq = 0;
function rewrite(argv, env) {
  const a = argv.map((x) => x
    .replace(/^(https?:\/\/)?[A-Za-z0-9.-]+:8000/, env.sim)
    .replace(/^(https?:\/\/)?(127\.0\.0\.1|localhost):9000/, env.proxy)
    .replace(/^(https?:\/\/)?(127\.0\.0\.1|localhost):9001/, env.api));
  const cmd = a[1];
  const set = (opt, v) => { const i = a.indexOf(opt); if (i > 0) a[i + 1] = v; };
  const sep = a.indexOf('--');
  set('--duration', '1s'); set('--requests', '8'); set('--stages', '1s:5'); set('--warmup', '0s');
  set('--metrics-listen', '127.0.0.1:0'); set('--otlp-listen', '127.0.0.1:0'); set('--listen-for', '1s'); set('--listen', '127.0.0.1:0'); set('--api', '127.0.0.1:0');
  if (cmd === 'run' && !a.includes('--duration') && !a.includes('--requests') && !a.includes('--check') && !a.includes('--dry-run')) a.push('--duration', '1s');
  if (cmd === 'sweep') {
    for (const o of ['--rates', '--concurrencies']) { const i = a.indexOf(o); if (i > 0) a[i + 1] = a[i + 1].split(',').slice(0, 2).join(','); }
    set('--ladder', '1:2:2'); set('--max-steps', '3'); set('--past-saturation', '0');
    if (a.includes('--adaptive') && !a.includes('--max-steps')) a.splice(2, 0, '--max-steps', '3');
    if (a.includes('--adaptive')) a.splice(2, 0, '--sat-concurrency', '8');
    if (sep < 0 && !a.includes('--interference')) a.push('--');
    if (!a.includes('--duration')) a.push('--duration', '1s');
    a.push('--drain', '2s');
    if (!a.includes('--output-len') && !a.includes('--target')) a.push('--output-len', 'fixed:16'); // answers done within 1s
  }
  if (cmd === 'chaos' && !a.includes('--check') && a[2] !== 'suggest') a.splice(2, 0, '--check');
  // runs of one block share a directory: each gets its own --out
  if (['run', 'sweep'].includes(cmd) && !a.includes('--out') && !a.includes('--check') && !a.includes('--dry-run')) {
    const at = a.indexOf('--') >= 0 ? a.indexOf('--') : a.length;
    a.splice(at, 0, '--out', `out-${++outSeq}`);
  }
  a.redirect = argv.redirect;
  return a;
}

// Result directories a report, compare or merge line reads: copies of one run.
function provideInputs(a, env, cwd) {
  if (!['report', 'compare', 'merge'].includes(a[1])) return;
  for (const o of ['-o', '--out']) { const i = a.indexOf(o); if (i > 0) fs.mkdirSync(path.dirname(path.resolve(cwd, a[i + 1])), { recursive: true }); }
  const takes = argOpts[a[1]] || new Set();
  let firstOperand = a[1] === 'merge' && !a.includes('--out');
  for (let i = 2; i < a.length; i++) {
    if (a[i].startsWith('-')) { if (takes.has(a[i])) i++; continue; }
    if (firstOperand) { firstOperand = false; continue; } // merge's OUT_DIR
    if (/[*?]/.test(a[i])) { // a glob that matched nothing: two inputs
      const g = a[i];
      a.splice(i, 1, g.replace(/[*?]/g, 'a'), g.replace(/[*?]/g, 'b'));
      assert.ok(!path.isAbsolute(a[i]), `${a[i]}: inputs are made only inside the test's directory`);
      fs.cpSync(env.runDir, path.resolve(cwd, a[i]), { recursive: true });
      i++;
    }
    const p = path.resolve(cwd, a[i].endsWith('result.json') ? path.dirname(a[i]) : a[i]);
    assert.ok(p.startsWith(cwd + path.sep), `${a[i]}: inputs are made only inside the test's directory`);
    if (!fs.existsSync(p)) fs.cpSync(env.runDir, p, { recursive: true });
  }
}

// A line made ready to run in its block's directory lcwd (a line reads what
// the lines above it in the block wrote): its argv as bash splits it there,
// rewritten.
function prepare(where, item, lcwd, env) {
  const line = typeof item === 'string' ? item : item.line;
  try {
    return { where, item, line, lcwd, a: rewrite(split(line, lcwd), env) };
  } catch (e) {
    return { where, item, line, lcwd, a: null, err: e.message };
  }
}

// A block's directory: the examples, and the files the docs take as the user's.
function blockDir(cwd, k) {
  const lcwd = path.join(cwd, `block-${k}`, 'work');
  fs.mkdirSync(lcwd, { recursive: true });
  for (const f of ['examples', 'faults.yaml', 'kb.jsonl', 'traces.jsonl']) fs.symlinkSync(path.join(cwd, f), path.join(lcwd, f));
  for (const [name, target, how] of fixtures) {
    if (!fs.existsSync(target)) continue;
    if (how === 'copy') fs.cpSync(target, path.join(lcwd, name), { recursive: true });
    else fs.symlinkSync(target, path.join(lcwd, name));
  }
  return lcwd;
}

// Runs a block's lines in order; its failures as text.
async function runBlock(cwd, k, where, items, env) {
  const lcwd = blockDir(cwd, k);
  const failures = [];
  for (const item of items) {
    const f = await runOne(prepare(where, item, lcwd, env), env);
    if (f) failures.push(f);
  }
  return failures;
}

// Runs one prepared line; a failure as text, or null.
async function runOne({ where, item, line, lcwd, a, err }, env) {
  if (!a) return `${where}: ${line}\n    ${err}`;
  if (a[0] === 'curl') {
    if (!/^http:\/\/127\.0\.0\.1/.test(a.find((x) => /^http/.test(x)) || '')) return null; // a remote host: not ours
    // a request that asks for a fault gets it: only the others must succeed
    const fail = a.some((x) => /x-tokenstorm-fault/.test(x)) ? [] : ['--fail'];
    const r = await runBin(['-sS', ...fail, '-m', '5', ...a.slice(1)], { bin: 'curl', cwd: lcwd, timeoutMs: 10000 });
    return r.code === 0 ? null : `${where}: ${line}\n    curl exit ${r.code}: ${r.stderr.trim()}`;
  }
  if (a[0] !== 'tokenstorm') return null;
  const serving = (a[1] === 'sim' && a[2] !== 'calibrate' && !a.includes('--list-profiles')) || (a[1] === 'proxy' && !a.includes('--check'));
  provideInputs(a, env, lcwd);
  if (a.some((x) => x.startsWith(env.proxy))) await fetch(env.api + '/reset', { method: 'POST' }); // faults an earlier line added
  let listened = false;
  const r = await runBin(a.slice(1), {
    cwd: lcwd, timeoutMs: serving ? 5000 : 90000,
    onStdout: (out, p) => { if (serving && /listening on/.test(out)) { listened = true; p.kill('SIGTERM'); } },
  });
  // `> FILE` inside the block's directory is kept for the lines below; a
  // user's path (~/..., $VAR/...) is not written
  const dest = a.redirect && !/[~$"]/.test(a.redirect) ? path.resolve(lcwd, a.redirect) : null;
  if (dest && dest.startsWith(lcwd + path.sep)) {
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.writeFileSync(dest, r.stdout);
  }
  // a quiet server prints nothing: that it was still serving when killed is enough
  let ok = serving ? listened || r.signal === 'SIGKILL' : r.code === 0 || r.code === 1;
  if (typeof item !== 'string') ok = r.code === 2 && r.stderr.includes(item.error.slice(0, 60));
  return ok ? null : `${where}: ${line}\n    ran: tokenstorm ${a.slice(1).join(' ')}\n    exit ${r.code}: ${r.stderr.trim().split('\n').slice(-2).join(' | ')}`;
}

// fn over items, k at a time; the results in the items' order.
async function pool(items, k, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => { while (next < items.length) { const i = next++; out[i] = await fn(items[i]); } };
  await Promise.all(Array.from({ length: Math.min(k, items.length) }, worker));
  return out;
}

test('every command line in README.md, docs/ and --help examples runs', { timeout: 600000 }, async () => {
  loadArgOpts();
  const blocks = []; // [where, [line...]]
  for (const f of ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => 'docs/' + f)])
    for (const b of extractBlocks(fs.readFileSync(path.join(root, f), 'utf8'))) blocks.push([f, b]);
  const top = spawnSync(BIN, ['--help'], { encoding: 'utf8' }).stdout;
  const cmds = [...top.matchAll(/^ {2}([a-z]+) {2,}/gm)].map((m) => m[1]);
  for (const c of cmds) {
    const ex = helpExamples(spawnSync(BIN, [c, '--help'], { encoding: 'utf8' }).stdout);
    if (ex.length) blocks.push([`${c} --help`, ex]);
  }
  const lines = blocks.flatMap(([, b]) => b);
  assert.ok(lines.length > 50, `only ${lines.length} lines found`);

  const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-docex-'));
  fs.symlinkSync(path.join(root, 'examples'), path.join(cwd, 'examples'));
  fs.copyFileSync(path.join(root, 'examples/faults.yaml'), path.join(cwd, 'faults.yaml'));
  fs.writeFileSync(path.join(cwd, 'kb.jsonl'), '{"text":"The KV cache keeps keys and values.","id":"d1"}\n');
  fs.writeFileSync(path.join(cwd, 'traces.jsonl'), '{"resourceSpans":[]}\n'); // an empty OTLP/JSON export
  const sim = await startSim(['--profile', 'tiny', '--any-model', '--admin', '--vector-data', 'gen:2000x8']);
  const proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0']);
  await new Promise((r) => setTimeout(r, 300));
  const apiPort = (proxy.output.match(/control API on http:\/\/[0-9.]+:(\d+)/) || [])[1];
  const env = { sim: sim.base, proxy: proxy.base, api: `http://127.0.0.1:${apiPort}` };
  const failures = [];
  try {
    env.runDir = path.join(cwd, '.run');
    const r0 = await runBin(['run', '--target', sim.base, '--rate', '10', '--duration', '1s', '--save-requests', '-q', '--out', env.runDir]);
    assert.equal(r0.code, 0, r0.stderr);
    // blocks that touch the shared proxy run one after the other (curl lines
    // add faults later lines use), beside the others, two at a time
    const viaProxy = ([, b]) => b.some((i) => /^curl |:900[01]\b/.test(typeof i === 'string' ? i : i.line));
    const indexed = blocks.map((b, k) => [k, b]);
    const sequential = async () => {
      const out = [];
      for (const [k, [where, items]] of indexed.filter(([, b]) => viaProxy(b))) out.push(...await runBlock(cwd, k, where, items, env));
      return out;
    };
    const [others, proxied] = await Promise.all([
      pool(indexed.filter(([, b]) => !viaProxy(b)), 2, ([k, [where, items]]) => runBlock(cwd, k, where, items, env)),
      sequential(),
    ]);
    const results = [...others.flat(), ...proxied];
    failures.push(...results.filter(Boolean));
  } finally {
    await proxy.stop();
    await sim.stop();
    fs.rmSync(cwd, { recursive: true, force: true });
  }
  assert.deepEqual(failures, [], `${failures.length} of ${lines.length} lines do not run:\n${failures.join('\n')}`);
});
