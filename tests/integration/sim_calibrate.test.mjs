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
