// Shadow traffic: `tokenstorm proxy --mirror URL` also sends requests to a
// second target; the client only gets the primary's answer, the mirror is
// bounded (drops counted) and both sides are timed and compared in /metrics.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, startServer, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-mirror-'));
const procs = [];
after(async () => {
  for (const p of procs) await p.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function proxy(args) {
  const p = await startServer(['proxy', '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0', ...args]);
  procs.push(p);
  for (let i = 0; i < 100 && !/control API on http/.test(p.output); i++) await sleep(20);
  p.api = p.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
  return p;
}

const metric = (text, name) => {
  const m = text.match(new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
};

async function load(target, name) {
  const r = await runBin(['run', '--target', target, '--model', 'tokenstorm/tiny', '--requests', '30', '--rate', '30',
    '--output-len', 'fixed:20', '--quiet', '--json', '--out', path.join(tmp, name), '--force'], { timeoutMs: 60000 });
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout).summary;
}

test('a slow mirror: the client gets the primary, the mirror queue is bounded and its drops counted', { timeout: 90000 }, async () => {
  const fast = await startSim(['--profile', 'tiny', '--no-noise']);
  const slow = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_fix_ms=30']);
  procs.push(fast, slow);
  const plain = await proxy(['--upstream', fast.base]);
  const mirrored = await proxy(['--upstream', fast.base, '--mirror', slow.base, '--mirror-max', '2']);
  const base = await load(plain.base, 'plain');
  const withMirror = await load(mirrored.base, 'mirror');
  assert.equal(withMirror.completed, 30);
  // the primary path is not slowed by the mirror (about 0.6 s per mirrored answer)
  assert.ok(withMirror.mean_e2el_ms < 2 * base.mean_e2el_ms + 50, `${withMirror.mean_e2el_ms} vs ${base.mean_e2el_ms} ms`);
  let m;
  for (let i = 0; i < 50; i++) { // the last mirrored answers come later
    m = await (await fetch(mirrored.api + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
    const inflight = metric(m, 'tokenstorm_proxy_mirror_requests_total') - metric(m, 'tokenstorm_proxy_mirror_compared_total');
    if (inflight === 0) break;
    await sleep(200);
  }
  const sampled = metric(m, 'tokenstorm_proxy_mirror_sampled_total');
  const sent = metric(m, 'tokenstorm_proxy_mirror_requests_total');
  const dropped = metric(m, 'tokenstorm_proxy_mirror_dropped_total');
  assert.equal(sampled, 30); // --model: no model lookup
  assert.equal(sent + dropped, sampled);
  assert.ok(dropped > 0 && sent >= 2, `${sent} sent, ${dropped} dropped`);
  assert.equal(metric(m, 'tokenstorm_proxy_mirror_compared_total'), sent);
  const diff = metric(m, 'tokenstorm_proxy_mirror_latency_diff_seconds_sum') / metric(m, 'tokenstorm_proxy_mirror_latency_diff_seconds_count');
  assert.ok(diff > 0.2, `the mirror is slower by ${diff} s on average`);
  assert.ok(metric(m, 'tokenstorm_proxy_mirror_similarity_count') >= 1);
  const simMean = metric(m, 'tokenstorm_proxy_mirror_similarity_sum') / metric(m, 'tokenstorm_proxy_mirror_similarity_count');
  assert.ok(simMean >= 0 && simMean <= 1);
});

test('a mirror that is down: errors only on the mirror side, the client unaffected', { timeout: 60000 }, async () => {
  const fast = await startSim(['--profile', 'tiny', '--no-noise']);
  procs.push(fast);
  const down = await startSim(['--profile', 'tiny']);
  const downBase = down.base;
  await down.stop('SIGKILL'); // its port is now closed
  const p = await proxy(['--upstream', fast.base, '--mirror', downBase, '--mirror-share', '50%']);
  const s = await load(p.base, 'down');
  assert.equal(s.completed, 30);
  await sleep(500);
  const m = await (await fetch(p.api + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
  const sent = metric(m, 'tokenstorm_proxy_mirror_requests_total');
  assert.ok(sent > 3 && sent < 27, `${sent} of 30 mirrored at 50%`);
  assert.equal(metric(m, 'tokenstorm_proxy_mirror_errors_total{side="mirror"}'), sent);
  assert.equal(metric(m, 'tokenstorm_proxy_mirror_errors_total{side="primary"}'), 0);
});
