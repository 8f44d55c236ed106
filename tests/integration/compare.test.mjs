// `tokenstorm merge` and `tokenstorm compare` on real runs: two `tokenstorm
// run` processes against one simulator merged into one result (counts add up,
// percentiles lie between the inputs'), and compare's verdicts: identical
// inputs -> nothing significant, exit 0; a slower simulator -> a TTFT
// regression, exit 1; usage errors -> exit 2.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-compare-'));
let fast;
let slow;
const dirs = {};

const ts = runBin;

const load = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'result.json'), 'utf8'));
const lines = (f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

function runArgs(target, out, seed) {
  return ['run', '--target', target, '--rate', '20', '--requests', '60', '--input-len', 'fixed:32',
    '--output-len', 'fixed:16', '--save-requests', '--out', out, '--seed', String(seed), '-q',
    '--workers', '1'];
}

before(async () => {
  fast = await startSim(['--profile', 'tiny', '--no-noise']);
  slow = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_w_ms=5']);
  dirs.a = path.join(tmp, 'a');
  dirs.b = path.join(tmp, 'b');
  dirs.slow = path.join(tmp, 'slow');
  // two processes of one run, at the same time, against one simulator
  const [ra, rb] = await Promise.all([ts(runArgs(fast.base, dirs.a, 1)), ts(runArgs(fast.base, dirs.b, 2))]);
  assert.equal(ra.code, 0, ra.stderr);
  assert.equal(rb.code, 0, rb.stderr);
  const rs = await ts(runArgs(slow.base, dirs.slow, 3));
  assert.equal(rs.code, 0, rs.stderr);
});

after(async () => {
  if (fast) await fast.stop('SIGKILL');
  if (slow) await slow.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('merge: counts add up, percentiles lie between the inputs', async () => {
  const out = path.join(tmp, 'merged');
  const r = await ts(['merge', out, dirs.a, path.join(dirs.b, 'result.json')]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /merged 2 runs: 120 requests/);
  const a = load(dirs.a);
  const b = load(dirs.b);
  const m = load(out);
  assert.equal(m.schema, 'tokenstorm.result/1');
  assert.equal(m.summary.completed, a.summary.completed + b.summary.completed);
  assert.equal(m.summary.completed, 120);
  assert.equal(m.summary.total_output_tokens, a.summary.total_output_tokens + b.summary.total_output_tokens);
  assert.equal(m.latency.itl.count, a.latency.itl.count + b.latency.itl.count);
  for (const metric of ['ttft', 'e2el', 'itl', 'tpot']) {
    for (const p of ['p50', 'p99']) {
      const lo = Math.min(a.latency[metric][p], b.latency[metric][p]);
      const hi = Math.max(a.latency[metric][p], b.latency[metric][p]);
      const v = m.latency[metric][p];
      assert.ok(v >= lo - 1e-9 && v <= hi + 1e-9, `${metric}.${p}: ${v} not in [${lo}, ${hi}]`);
    }
  }
  // the runs overlapped: the merged duration is the union, not the sum
  const da = a.summary.duration;
  const db = b.summary.duration;
  assert.ok(m.summary.duration >= Math.max(da, db) - 1e-6, `${m.summary.duration} < max(${da}, ${db})`);
  assert.ok(m.summary.duration < da + db, `${m.summary.duration} >= ${da} + ${db}`);
  assert.equal(m.run.merged_from.length, 2);
  // the timeline's counts add up too
  const sum = (doc, k) => doc.timeline.reduce((s, p) => s + p[k], 0);
  assert.equal(sum(m, 'completed'), sum(a, 'completed') + sum(b, 'completed'));
  assert.equal(sum(m, 'sent'), sum(a, 'sent') + sum(b, 'sent'));
  assert.ok(m.timeline.every((p) => typeof p.ttft_p50_ms === 'number'));
  // requests.jsonl: every line, ids unique
  const reqs = lines(path.join(out, 'requests.jsonl'));
  assert.equal(reqs.length, 120);
  assert.equal(new Set(reqs.map((q) => q.id)).size, 120);
  assert.ok(reqs.every((q) => /^[01]-\d+$/.test(q.id)));
  // the merged hlog is a standard interval log with the intervals of both
  const hlog = fs.readFileSync(path.join(out, 'latency.hlog'), 'utf8');
  assert.match(hlog, /^#\[Histogram log format version 1\.3\]/m);
  assert.match(hlog, /^Tag=ttft,0\.000,1\.000,/m);
  // again into the same place: refused without --force (exit 2), done with it
  const again = await ts(['merge', out, dirs.a, dirs.b]);
  assert.equal(again.code, 2);
  assert.match(again.stderr, /--force/);
  const forced = await ts(['merge', '--force', '--slo', 'ttft.p50<1ms', '-q', out, dirs.a, dirs.b]);
  assert.equal(forced.code, 1, 'the impossible SLO fails on the merged result');
  // the merged result is a run like any other: compare reads it
  const c = await ts(['compare', out, out]);
  assert.equal(c.code, 0, c.stderr);
});

test('compare: identical inputs show no significant change', async () => {
  const r = await ts(['compare', '--format', 'json', '--fail-on', 'ttft.p50>+10%', '--fail-on',
    'throughput<-5%', dirs.a, dirs.a]);
  assert.equal(r.code, 0, r.stderr);
  const doc = JSON.parse(r.stdout);
  assert.equal(doc.schema, 'tokenstorm.compare/1');
  assert.equal(doc.regression, false);
  assert.equal(doc.method.resampled, 'requests');
  assert.equal(doc.method.resamples, 2000);
  for (const row of doc.metrics) {
    assert.equal(row.significant, false, row.name);
    if (row.base !== null) assert.equal(row.change, 0, row.name);
  }
  const ttft = doc.metrics.find((x) => x.name === 'ttft.p50');
  assert.equal(ttft.method, 'requests');
  assert.equal(ttft.mwu.p, 1);
  assert.ok(ttft.ci[0] <= 0 && ttft.ci[1] >= 0);
  assert.ok(doc.rules.every((x) => x.holds === false));
});

test('compare: a slower simulator is a TTFT regression (exit 1)', async () => {
  const r = await ts(['compare', '--fail-on', 'ttft.p50>+10%', dirs.a, dirs.slow]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /^ttft\.p50 \(ms\).*REGRESSION$/m);
  assert.match(r.stdout, /verdict: REGRESSION \(1 of 1 rules\)/);

  const j = await ts(['compare', '--format', 'json', '--fail-on', 'ttft.p50>+10%', dirs.a, dirs.slow]);
  assert.equal(j.code, 1);
  const doc = JSON.parse(j.stdout);
  const row = doc.metrics.find((x) => x.name === 'ttft.p50');
  assert.ok(row.new > row.base * 1.5, `slow ${row.new} ms vs fast ${row.base} ms`);
  assert.equal(row.significant, true);
  assert.equal(row.verdict, 'worse');
  assert.ok(row.ci[0] > 0);
  assert.ok(row.mwu.p < 0.001);
  assert.equal(doc.rules[0].holds, true);

  // from the histograms alone too
  const h = await ts(['compare', '--no-requests', '--fail-on', 'ttft.p50>+10%', dirs.a, dirs.slow]);
  assert.equal(h.code, 1, h.stdout + h.stderr);
  // the other way round it is an improvement, not a regression
  const back = await ts(['compare', '--fail-on', 'ttft.p50>+10%', dirs.slow, dirs.a]);
  assert.equal(back.code, 0, back.stdout);
  assert.match(back.stdout, /^ttft\.p50 \(ms\).*better$/m);
  // a threshold far above the change does not fail
  const loose = await ts(['compare', '--fail-on', 'ttft.p50>+10000%', dirs.a, dirs.slow]);
  assert.equal(loose.code, 0, loose.stdout);
});

test('compare: a self-contained HTML page', async () => {
  const page = path.join(tmp, 'compare.html');
  const r = await ts(['compare', '--format', 'html', '-o', page, '--fail-on', 'ttft.p50>+10%', dirs.a, dirs.slow]);
  assert.equal(r.code, 1, r.stderr);
  const html = fs.readFileSync(page, 'utf8');
  assert.match(html, /^<!DOCTYPE html>/);
  assert.match(html, /<table id="compare">/);
  assert.match(html, /<tr class="regression"><td class="m">ttft\.p50 \(ms\)<\/td>/);
  // charts drawn by the project: the two runs' CDFs per metric
  for (const m of ['ttft', 'tpot', 'itl', 'e2el']) assert.match(html, new RegExp(`<svg[^>]*id="cmp-${m}-cdf"`));
  // no network request: nothing loaded, only in-page references (clip paths)
  assert.doesNotMatch(html, /<script|<link|<img|<iframe|src=|href=|@import/i);
  assert.doesNotMatch(html, /url\((?!#)/i);
});

test('compare: usage errors and bad input exit 2', async () => {
  let r = await ts(['compare', '--fail-on', 'ttft.p95=+10%', dirs.a, dirs.b]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /expected '>', '>=', '<' or '<=' at column 9/);
  r = await ts(['compare', dirs.a]);
  assert.equal(r.code, 2);
  r = await ts(['compare', dirs.a, path.join(tmp, 'nope')]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /nope/);
  const bad = path.join(tmp, 'bad.json');
  fs.writeFileSync(bad, '{"schema":"something else"}');
  r = await ts(['compare', dirs.a, bad]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /not a tokenstorm\.result\/1 document/);
  r = await ts(['compare', '--alpha', '0.9', dirs.a, dirs.b]);
  assert.equal(r.code, 2);
  r = await ts(['merge', path.join(tmp, 'm1'), dirs.a]);
  assert.equal(r.code, 2);
  r = await ts(['compare', '--help']);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /examples:/);
});
