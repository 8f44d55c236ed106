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

// `--mirror-out DIR`: the pairs as two runs that compare and report read, and
// mirror.json; rewritten periodically (a killed proxy leaves them) and at the end.
const readJson = (f) => JSON.parse(fs.readFileSync(f, 'utf8'));

test('--mirror-out: DIR/primary and DIR/mirror compare with intervals; mirror.json has the rest', { timeout: 90000 }, async () => {
  const fast = await startSim(['--profile', 'tiny', '--no-noise']);
  const slow = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_fix_ms=10']);
  procs.push(fast, slow);
  const out = path.join(tmp, 'mo');
  const p = await proxy(['--upstream', fast.base, '--mirror', slow.base, '--mirror-out', out]);
  // written at once, so the directory is usable before any traffic
  assert.equal(readJson(path.join(out, 'mirror.json')).compared, 0);
  const s = await load(p.base, 'mo-run');
  assert.equal(s.completed, 30);
  assert.equal((await p.stop('SIGTERM')).code, 0); // the last write at the end
  const mj = readJson(path.join(out, 'mirror.json'));
  assert.equal(mj.schema, 'tokenstorm.mirror/1');
  assert.equal(mj.sampled, 30);
  assert.equal(mj.mirrored + mj.dropped, 30);
  assert.equal(mj.compared, mj.mirrored);
  assert.deepEqual(mj.errors, { primary_only: 0, mirror_only: 0, both: 0 });
  assert.ok(mj.latency_diff_s.count === mj.compared && mj.latency_diff_s.mean > 0.1, JSON.stringify(mj.latency_diff_s));
  assert.ok(mj.similarity.count === mj.compared && mj.similarity.min >= 0 && mj.similarity.mean <= 1);
  for (const side of ['primary', 'mirror']) {
    const r = readJson(path.join(out, side, 'result.json'));
    assert.equal(r.schema, 'tokenstorm.result/1');
    assert.equal(r.summary.completed, mj.compared, side);
    assert.equal(r.summary.total_output_tokens, 20 * mj.compared, side); // usage of each answer
    assert.equal(r.run.target, side);
    // each event timed: role + 20 tokens + finish, so 21 gaps an answer
    assert.ok(r.latency.itl.count >= 20 * mj.compared, `${side}: ${r.latency.itl.count} gaps`);
    assert.ok(r.latency.ttft.p50 < r.latency.e2el.p50, side);
  }
  const c = await runBin(['compare', path.join(out, 'primary'), path.join(out, 'mirror'), '--json',
    '--fail-on', 'e2el.p50>+100ms']);
  assert.equal(c.code, 1, c.stderr); // the mirror is slower by ~0.2 s per answer: a regression
  const cmp = JSON.parse(c.stdout);
  const row = cmp.metrics.find((r) => r.name === 'e2el.p50');
  assert.ok(row, c.stdout.slice(0, 400));
  assert.ok(row.change > 100 && row.ci[0] > 0 && row.ci[0] <= row.change && row.change <= row.ci[1],
    JSON.stringify(row));
  assert.ok(row.significant && row.regression, JSON.stringify(row));
  // the mirror's engine steps are 10 ms longer: so is every gap between its tokens
  const itl = cmp.metrics.find((r) => r.name === 'itl.p50');
  assert.ok(itl.change > 5 && itl.change < 30 && itl.ci[0] > 0, JSON.stringify(itl));
  const rep = await runBin(['report', out]);
  assert.equal(rep.code, 0, rep.stderr);
  assert.match(rep.stdout, /run mirror/);
  assert.match(rep.stdout, /run primary/);
  // and the pairs of mirror.json: counts, the latency difference, the similarity
  assert.match(rep.stdout, /== mirror mo /);
  assert.match(rep.stdout, new RegExp(`pairs: 30 sampled, ${mj.mirrored} mirrored, ${mj.dropped} dropped, ${mj.compared} compared`));
  assert.match(rep.stdout, /errors: 0 on the primary only, 0 on the mirror only, 0 on both/);
  const lat = rep.stdout.match(/ended \+([0-9.]+) s after the primary's/);
  assert.ok(lat && Math.abs(Number(lat[1]) - mj.latency_diff_s.mean) < 0.001, rep.stdout);
  const sim = rep.stdout.match(/mean ([0-9.]+), min ([0-9.]+) \((\d+) pairs with text\)/);
  assert.ok(sim && Math.abs(Number(sim[1]) - mj.similarity.mean) < 0.001 &&
    Math.abs(Number(sim[2]) - mj.similarity.min) < 0.001 && Number(sim[3]) === mj.similarity.count, rep.stdout);
  const dig = await runBin(['report', out, '--format', 'json']);
  assert.equal(dig.code, 0, dig.stderr);
  const md = JSON.parse(dig.stdout).inputs.find((d) => d.kind === 'mirror');
  assert.ok(md, dig.stdout.slice(0, 300));
  assert.equal(md.compared, mj.compared);
  assert.deepEqual(md.similarity, mj.similarity);
  const page = await runBin(['report', out, '--format', 'html']);
  assert.equal(page.code, 0, page.stderr);
  assert.match(page.stdout, /<section id="mirror1"><h2>Mirror: mo<\/h2>/);
  assert.match(page.stdout, /<a href="#mirror1">Mirror mo<\/a>/);
  // a mirror.json the proxy did not write is refused, naming the field
  const bad = path.join(tmp, 'badmirror.json');
  fs.writeFileSync(bad, JSON.stringify({ ...mj, compared: -1 }));
  const br = await runBin(['report', bad]);
  assert.equal(br.code, 2, br.stderr);
  assert.match(br.stderr, /badmirror\.json: compared: expected a count/);
});

test('--mirror-out: a proxy killed with SIGKILL leaves what it had written periodically', { timeout: 60000 }, async () => {
  const fast = await startSim(['--profile', 'tiny', '--no-noise']);
  procs.push(fast);
  const out = path.join(tmp, 'mo-kill');
  const p = await proxy(['--upstream', fast.base, '--mirror', fast.base, '--mirror-out', out]);
  const s = await load(p.base, 'mo-kill-run');
  assert.equal(s.completed, 30);
  let mj;
  for (let i = 0; i < 50; i++) { // rewritten every 2 s
    await sleep(200);
    mj = readJson(path.join(out, 'mirror.json'));
    if (mj.compared === 30) break;
  }
  await p.stop('SIGKILL');
  assert.equal(mj.compared, 30);
  assert.equal(readJson(path.join(out, 'mirror', 'result.json')).summary.completed, 30);
  assert.equal(mj.similarity.count, 30);
});

test('--mirror-out without --mirror, or a directory that cannot be made, is a usage error', async () => {
  const r = await runBin(['proxy', '--upstream', 'http://127.0.0.1:9', '--mirror-out', path.join(tmp, 'x')]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--mirror-out needs --mirror/);
  const file = path.join(tmp, 'a-file');
  fs.writeFileSync(file, 'x');
  const r2 = await runBin(['proxy', '--upstream', 'http://127.0.0.1:9', '--mirror', 'http://127.0.0.1:9',
    '--mirror-out', path.join(file, 'sub'), '--listen', '127.0.0.1:0', '--no-api']);
  assert.equal(r2.code, 2);
  assert.match(r2.stderr, /--mirror-out: cannot create/);
});

test('shutdown: mirror calls finish within the grace; past it their pairs count as cut, not errors', { timeout: 60000 }, async () => {
  const fast = await startSim(['--profile', 'tiny', '--no-noise']);
  const slow = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_fix_ms=500']); // ~10 s an answer
  procs.push(fast, slow);
  const out = path.join(tmp, 'mo-grace');
  const p = await proxy(['--upstream', fast.base, '--mirror', slow.base, '--mirror-out', out, '--grace', '300ms']);
  const s = await load(p.base, 'mo-grace-run');
  assert.equal(s.completed, 30);
  const t0 = Date.now();
  assert.equal((await p.stop('SIGTERM')).code, 0);
  assert.ok(Date.now() - t0 < 8000, 'the grace bounds the wait for the mirror');
  const mj = readJson(path.join(out, 'mirror.json'));
  assert.equal(mj.mirrored, 30);
  assert.equal(mj.cut, 30);
  assert.equal(mj.compared, 0);
  assert.deepEqual(mj.errors, { primary_only: 0, mirror_only: 0, both: 0 });
});
