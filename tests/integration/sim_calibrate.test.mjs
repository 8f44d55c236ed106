// tokenstorm sim calibrate on real results: runs against a simulator with
// hidden step-time parameters, then the fit must find them again from the
// result directories alone (client-side timings on a busy machine: wide margins).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSim, runBin } from './lib.mjs';

const HIDDEN = { t_fix_ms: 0.5, t_w_ms: 4, b_ms_per_token: 0.02, t_sample_ms_per_seq: 0.25 };
let sim;
let tmp;

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-calib-'));
  const sets = Object.entries(HIDDEN).flatMap(([k, v]) => ['--set', `${k}=${v}`]);
  sim = await startSim(['--profile', 'tiny', '--no-noise', ...sets]);
});

after(async () => {
  if (sim) await sim.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function closedRun(name, users, requests, input, output) {
  const out = path.join(tmp, name);
  const r = await runBin(['run', '--target', sim.base, '--concurrency', String(users),
    '--requests', String(requests), '--input-len', `fixed:${input}`, '--output-len', `fixed:${output}`,
    '--out', out, '-q'], { timeoutMs: 60000 });
  assert.equal(r.code, 0, r.stderr);
  return out;
}

test('the fit finds the hidden parameters again from run results', { timeout: 180000 }, async () => {
  const dirs = [
    await closedRun('short1', 1, 10, 400, 40),
    await closedRun('short12', 12, 48, 400, 40),
    await closedRun('long1', 1, 6, 1500, 30),
    await closedRun('long6', 6, 24, 1500, 30),
  ];
  const yaml = path.join(tmp, 'fit.yaml');
  const r = await runBin(['sim', 'calibrate', '--profile', 'tiny', '-o', yaml, ...dirs], { timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stderr);
  const text = fs.readFileSync(yaml, 'utf8');
  const val = (k) => Number(text.match(new RegExp(`^${k}: ([0-9.e+-]+)$`, 'm'))[1]);
  const got = Object.fromEntries(Object.keys(HIDDEN).map((k) => [k, val(k)]));
  // The decode floor (t_fix + t_w: the two add up in every memory-bound step, so
  // only their sum is determined here), the compute per token and the per-seq
  // cost carry the curves.
  const floor = got.t_fix_ms + got.t_w_ms;
  assert.ok(Math.abs(floor / (HIDDEN.t_fix_ms + HIDDEN.t_w_ms) - 1) < 0.25, `t_fix + t_w ${floor}\n${text}`);
  assert.ok(Math.abs(got.b_ms_per_token / HIDDEN.b_ms_per_token - 1) < 0.3, `b ${got.b_ms_per_token}\n${text}`);
  assert.ok(Math.abs(got.t_sample_ms_per_seq / HIDDEN.t_sample_ms_per_seq - 1) < 0.5,
    `t_sample ${got.t_sample_ms_per_seq}\n${text}`);
  assert.match(text, /^base: tiny$/m);
  assert.match(text, /short12 \(12 users\)\s+tpot_p50_ms/);
  // what it printed is a profile the simulator starts from
  const fitted = await startSim(['--config', yaml]);
  assert.match(fitted.output, /profile/);
  await fitted.stop();
});

test('unusable inputs exit 2 and name the directory', async () => {
  const r = await runBin(['sim', 'calibrate', path.join(tmp, 'nope')]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /nope/);
  const u = await runBin(['sim', 'calibrate', '--fit', 'max_num_seqs', path.join(tmp, 'nope')]);
  assert.equal(u.code, 2);
  const h = await runBin(['sim', 'calibrate']);
  assert.equal(h.code, 2);
  assert.match(h.stderr, /RESULT_DIR/);
});

// A server whose batch cap and KV cache are hidden: runs with --server-metrics
// scrape its /metrics (vllm:num_requests_running / _waiting,
// vllm:kv_cache_usage_perc) and calibrate pins both from them; the same load
// without --server-metrics leaves them at the base profile.
test('server metrics pin the hidden batch cap and KV cache', { timeout: 180000 }, async () => {
  const HIDDEN_SEQS = 4;
  const HIDDEN_KV = 12288;
  const capped = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_w_ms=4',
    '--set', `max_num_seqs=${HIDDEN_SEQS}`, '--set', `kv_capacity_tokens=${HIDDEN_KV}`,
    '--set', 'max_model_len=4096']);
  try {
    const run = async (name, users, requests, metrics) => {
      const out = path.join(tmp, name);
      const r = await runBin(['run', '--target', capped.base, '--concurrency', String(users),
        '--requests', String(requests), '--input-len', 'fixed:400', '--output-len', 'fixed:30',
        ...(metrics ? ['--server-metrics', `${capped.base}/metrics`, '--server-metrics-interval', '100ms'] : []),
        '--out', out, '-q'], { timeoutMs: 60000 });
      assert.equal(r.code, 0, r.stderr);
      return out;
    };
    const dirs = [await run('cap10', 10, 40, true), await run('cap2', 2, 8, true)];
    const r = await runBin(['sim', 'calibrate', '--profile', 'tiny', '--set', 'max_model_len=4096',
      '--fit', 't_w_ms,b_ms_per_token', '--max-evals', '60', ...dirs], { timeoutMs: 60000 });
    assert.equal(r.code, 0, r.stderr);
    const val = (k) => Number((r.stdout.match(new RegExp(`^${k}: ([0-9.e+-]+)$`, 'm')) || [])[1]);
    assert.equal(val('max_num_seqs'), HIDDEN_SEQS, r.stdout);
    assert.ok(Math.abs(val('kv_capacity_tokens') / HIDDEN_KV - 1) < 0.25, r.stdout);
    assert.match(r.stdout, /^# from server metrics: max_num_seqs: the batch held 4 sequences/m);
    assert.match(r.stdout, /^# from server metrics: kv_capacity_tokens: /m);
    assert.match(r.stdout, /^# fitted: t_w_ms, b_ms_per_token$/m);
    assert.match(r.stdout, /^# server metrics: 2 of 2 results/m);
    // the YAML holds what the fit started from (--set max_model_len) and loads
    const yaml = path.join(tmp, 'pinned.yaml');
    fs.writeFileSync(yaml, r.stdout);
    assert.match(r.stdout, /^max_model_len: 4096$/m);
    const fitted = await startSim(['--config', yaml]);
    await fitted.stop();

    // the same load without --server-metrics: nothing pinned, and the YAML says why
    const plain = await run('plain10', 10, 40, false);
    const u = await runBin(['sim', 'calibrate', '--profile', 'tiny', '--set', 'max_model_len=4096',
      '--fit', 't_w_ms,b_ms_per_token', '--max-evals', '60', plain], { timeoutMs: 60000 });
    assert.equal(u.code, 0, u.stderr);
    assert.doesNotMatch(u.stdout, /^(max_num_seqs|kv_capacity_tokens):/m);
    assert.match(u.stdout, /^# left at the base profile: max_num_seqs: no result has server metrics/m);
    // a --set key is kept, and --no-server-metrics ignores them
    const k = await runBin(['sim', 'calibrate', '--profile', 'tiny', '--set', 'max_model_len=4096',
      '--set', 'max_num_seqs=64', '--fit', 't_w_ms', '--max-evals', '20', ...dirs], { timeoutMs: 60000 });
    assert.equal(k.code, 0, k.stderr);
    assert.match(k.stdout, /^# kept as you set it \(--set, --config\): max_num_seqs$/m);
    assert.match(k.stdout, /^max_num_seqs: 64$/m);
    const cfg = path.join(tmp, 'mine.yaml');
    fs.writeFileSync(cfg, 'base: tiny\nmax_num_seqs: 8\nmax_model_len: 4096\n');
    const kc = await runBin(['sim', 'calibrate', '--profile', 'tiny', '--config', cfg,
      '--fit', 't_w_ms', '--max-evals', '20', ...dirs], { timeoutMs: 60000 });
    assert.equal(kc.code, 0, kc.stderr);
    assert.match(kc.stdout, /^max_num_seqs: 8$/m);
    assert.match(kc.stdout, /^# kept as you set it \(--set, --config\): max_num_seqs$/m);
    assert.match(k.stdout, /^kv_capacity_tokens: /m);
    const n = await runBin(['sim', 'calibrate', '--profile', 'tiny', '--set', 'max_model_len=4096',
      '--no-server-metrics', '--fit', 't_w_ms', '--max-evals', '20', ...dirs], { timeoutMs: 60000 });
    assert.equal(n.code, 0, n.stderr);
    assert.doesNotMatch(n.stdout, /^(max_num_seqs|kv_capacity_tokens):/m);
  } finally {
    await capped.stop();
  }
});

// A server whose KV cache caps the batch long before max_num_seqs: the KV
// cache is pinned, max_num_seqs is not (the queue is the cache's doing).
test('a KV-bound server pins the KV cache and not the batch cap', { timeout: 120000 }, async () => {
  const HIDDEN_KV = 5000;
  const kvsim = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_w_ms=4',
    '--set', 'max_num_seqs=64', '--set', `kv_capacity_tokens=${HIDDEN_KV}`, '--set', 'max_model_len=4096']);
  try {
    const out = path.join(tmp, 'kv16');
    const r = await runBin(['run', '--target', kvsim.base, '--concurrency', '16', '--requests', '40',
      '--input-len', 'fixed:400', '--output-len', 'fixed:150', '--server-metrics', 'auto',
      '--server-metrics-interval', '100ms', '--out', out, '-q'], { timeoutMs: 60000 });
    assert.equal(r.code, 0, r.stderr);
    const c = await runBin(['sim', 'calibrate', '--profile', 'tiny', '--set', 'max_model_len=4096',
      '--fit', 't_w_ms', '--max-evals', '30', out], { timeoutMs: 60000 });
    assert.equal(c.code, 0, c.stderr);
    const kv = Number((c.stdout.match(/^kv_capacity_tokens: ([0-9]+)$/m) || [])[1]);
    assert.ok(Math.abs(kv / HIDDEN_KV - 1) < 0.25, c.stdout);
    assert.doesNotMatch(c.stdout, /^max_num_seqs:/m);
    assert.match(c.stdout, /^# left at the base profile: max_num_seqs: .*the KV cache, not max_num_seqs/m);
  } finally {
    await kvsim.stop();
  }
});
