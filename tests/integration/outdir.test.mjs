// Result directories are never lost or mixed (issue 15): run, sweep and chaos
// refuse an --out that holds results (unless --force, which removes only
// tokenstorm's files), that is not a writable directory, or that another
// process holds; and a run killed with SIGKILL can still be reported.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, runBin, startSim, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-outdir-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// runBin in tmp unless told another folder.
const ts = (args, { timeoutMs, cwd = tmp } = {}) => runBin(args, { timeoutMs, cwd });

const short = ['--duration', '1s', '--rate', '5', '--input-len', 'fixed:64', '--output-len', 'fixed:8', '-q'];

test('run refuses an --out that holds results; --force removes only its own files', async () => {
  const dir = path.join(tmp, 'again');
  const first = await ts(['run', ...short, '--save-requests', '--out', dir]);
  assert.equal(first.code, 0, first.stderr);
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'mine');
  const before = fs.readFileSync(path.join(dir, 'result.json'), 'utf8');

  const again = await ts(['run', ...short, '--out', dir]);
  assert.equal(again.code, 2, again.stderr);
  assert.match(again.stderr, /already holds results \(.*result\.json.*\).*--force/);
  assert.equal(fs.readFileSync(path.join(dir, 'result.json'), 'utf8'), before, 'nothing overwritten');

  const forced = await ts(['run', ...short, '--out', dir, '--force']);
  assert.equal(forced.code, 0, forced.stderr);
  assert.match(forced.stderr, /--force: removed from .*: .*requests\.jsonl/);
  assert.notEqual(fs.readFileSync(path.join(dir, 'result.json'), 'utf8'), before);
  assert.equal(fs.existsSync(path.join(dir, 'requests.jsonl')), false, 'the old requests.jsonl is gone');
  assert.equal(fs.readFileSync(path.join(dir, 'notes.txt'), 'utf8'), 'mine', 'a user file is kept');
});

test('run refuses an --out that is not a directory, before sending anything', async () => {
  const file = path.join(tmp, 'a-file');
  fs.writeFileSync(file, 'x');
  // a target nobody listens on: the refusal must come before any connection attempt
  for (const out of [file, path.join(file, 'sub')]) {
    const r = await ts(['run', '--target', 'http://127.0.0.1:9/v1', '--model', 'm', ...short, '--out', out]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--out: .*(not a directory|Not a directory)/);
    assert.doesNotMatch(r.stderr, /connect|refused/i);
  }
  assert.equal(fs.readFileSync(file, 'utf8'), 'x');
});

test('two processes cannot write one directory: the second exits 2 at once', async () => {
  const dir = path.join(tmp, 'shared');
  const firstP = ts(['run', '--duration', '4s', '--rate', '5', '--save-requests', '--out', dir, '-q']);
  // wait (bounded) until the first holds the lock
  const lock = path.join(dir, '.tokenstorm.lock');
  for (let i = 0; i < 100 && !(fs.existsSync(lock) && fs.readFileSync(lock, 'utf8').trim()); i++) await sleep(50);
  const second = await ts(['run', ...short, '--save-requests', '--out', dir]);
  assert.equal(second.code, 2, second.stderr);
  assert.match(second.stderr, /in use by another tokenstorm process \(pid \d+\)/);
  const first = await firstP;
  assert.equal(first.code, 0, first.stderr);
  // the first run's files are its own: every line parses
  const lines = fs.readFileSync(path.join(dir, 'requests.jsonl'), 'utf8').trim().split('\n');
  for (const l of lines) JSON.parse(l);
  const res = JSON.parse(fs.readFileSync(path.join(dir, 'result.json'), 'utf8'));
  assert.equal(res.summary.requests, lines.length);
});

test('sweep and chaos refuse a directory holding results; chaos defaults to a timestamped one', async () => {
  const dir = path.join(tmp, 'sw');
  fs.mkdirSync(path.join(dir, 'step-01-r1'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'sweep.json'), '{}');
  const sw = await ts(['sweep', '--rates', '1', '--out', dir, '--', '--duration', '1s']);
  assert.equal(sw.code, 2, sw.stderr);
  assert.match(sw.stderr, /already holds results/);

  const exp = new URL('../../examples/chaos/cold-start.yaml', import.meta.url).pathname;
  const cdir = path.join(tmp, 'ch');
  fs.mkdirSync(path.join(cdir, 'run'), { recursive: true });
  fs.writeFileSync(path.join(cdir, 'run', 'result.json'), '{}');
  const ch = await ts(['chaos', exp, '--out', cdir]);
  assert.equal(ch.code, 2, ch.stderr);
  assert.match(ch.stderr, /already holds results \(run\/\)/);

  const help = await ts(['chaos', '--help']);
  assert.match(help.stdout, /default \.\/tokenstorm-results\/<time>-chaos/);
});

test('after kill -9 mid-run, report rebuilds the result from latency.hlog and requests.jsonl', async () => {
  const sim = await startSim(['--profile', 'tiny']);
  try {
    const dir = path.join(tmp, 'killed');
    const p = spawn(BIN, ['run', '--target', `${sim.base}/v1`, '--duration', '60s',
      '--rate', '20', '--input-len', 'fixed:64', '--output-len', 'fixed:16', '--save-requests',
      '--out', dir, '-q'], { stdio: 'ignore' });
    const exited = new Promise((res) => p.on('exit', (code, signal) => res({ code, signal })));
    // a few seconds of load, with lines in requests.jsonl (bounded wait)
    const rq = path.join(dir, 'requests.jsonl');
    await sleep(3000);
    for (let i = 0; i < 100 && !(fs.existsSync(rq) && fs.statSync(rq).size > 0); i++) await sleep(100);
    p.kill('SIGKILL');
    const ex = await exited;
    assert.equal(ex.signal, 'SIGKILL');
    assert.equal(fs.existsSync(path.join(dir, 'result.json')), false, 'the killed run wrote no result.json');

    const text = await ts(['report', dir]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /RECOVERED: no result\.json: the run did not finish/);
    assert.match(text.stdout, /rebuilt from latency\.hlog, requests\.jsonl/);

    // the figures agree with requests.jsonl's lines (the last one may have been cut by the kill)
    const lines = fs.readFileSync(rq, 'utf8').split('\n').filter((l) => l.trim());
    const parsed = [];
    for (const l of lines) { try { parsed.push(JSON.parse(l)); } catch { /* cut by the kill */ } }
    assert.ok(parsed.length > 5, `requests.jsonl has ${parsed.length} lines`);
    const counted = parsed.filter((r) => !r.warmup);
    const ok = counted.filter((r) => r.outcome === 'ok').length;
    const out = counted.filter((r) => r.outcome === 'ok').reduce((a, r) => a + r.output_tokens, 0);
    const js = await ts(['report', '--format', 'json', dir]);
    assert.equal(js.code, 0, js.stderr);
    const doc = JSON.parse(js.stdout).inputs[0];
    assert.deepEqual(doc.recovered.from, ['latency.hlog', 'requests.jsonl']);
    assert.equal(doc.recovered.request_lines, parsed.length);
    assert.equal(doc.recovered.skipped_lines, lines.length - parsed.length);
    assert.equal(doc.summary.requests, counted.length);
    assert.equal(doc.summary.completed, ok);
    assert.equal(doc.summary.total_output_tokens, out);
    assert.equal(doc.run.end_mode, 'cut');
    assert.ok(doc.summary.duration >= 2 && doc.summary.duration < 60, `duration ${doc.summary.duration}`);
    assert.ok(doc.latency.itl.count > 0, 'ITL from latency.hlog');
    assert.equal(doc.latency.e2el.count, ok);

    // merge reads it too (with a run that finished)
    const other = path.join(tmp, 'other');
    const o = await ts(['run', '--target', `${sim.base}/v1`, ...short, '--out', other]);
    assert.equal(o.code, 0, o.stderr);
    const ores = JSON.parse(fs.readFileSync(path.join(other, 'result.json'), 'utf8'));
    const merged = path.join(tmp, 'merged');
    const m = await ts(['merge', merged, dir, other]);
    assert.equal(m.code, 0, m.stderr);
    const mres = JSON.parse(fs.readFileSync(path.join(merged, 'result.json'), 'utf8'));
    assert.equal(mres.summary.requests, counted.length + ores.summary.requests);

    // and the directory can be used again only with --force
    const again = await ts(['run', '--target', `${sim.base}/v1`, ...short, '--out', dir]);
    assert.equal(again.code, 2, again.stderr);
  } finally {
    await sim.stop();
  }
});

test('report says a run is still going on instead of recovering it', async () => {
  const dir = path.join(tmp, 'live');
  const p = ts(['run', '--duration', '4s', '--rate', '5', '--out', dir, '-q']);
  const hlog = path.join(dir, 'latency.hlog');
  for (let i = 0; i < 100 && !fs.existsSync(hlog); i++) await sleep(50);
  const r = await ts(['report', dir]);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /still going on \(pid \d+/);
  assert.equal((await p).code, 0);
});
