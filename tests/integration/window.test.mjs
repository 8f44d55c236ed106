// Achieved throughput over the steady window (issue 14): what completed
// between one request time after the start (or the warm-up's end) and the
// end of sending, so neither the drain nor the ramp dilutes it, and a closed
// loop's warm-up requests that end in the window count. The whole-run figures
// (vLLM's: completed over the duration with its drain) stay under their own
// names. Every target is the simulator on 127.0.0.1; every run is bounded.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-window-'));
let sim;

before(async () => {
  sim = await startSim(['--profile', 'tiny']);
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const readJson = (f) => JSON.parse(fs.readFileSync(f, 'utf8'));
const near = (got, want, rel, what) =>
  assert.ok(Math.abs(got - want) <= rel * want, `${what}: ${got} not within ${rel * 100}% of ${want}`);

test('open loop: the steady window reads the rate that was sent, the whole run reads lower', async () => {
  const out = path.join(tmp, 'open');
  const r = await runBin(['run', '--target', sim.base, '--rate', '20', '--duration', '6s',
    '--output-len', 'fixed:48', '--out', out]);
  assert.equal(r.code, 0, r.stderr);
  const s = readJson(path.join(out, 'result.json')).summary;
  const w = s.window;
  assert.equal(w.method, 'steady_window', JSON.stringify(w));
  assert.equal(w.send_end_s, 6);
  // it opens one request time (E2EL p50, from the histogram) after time 0
  near(w.start_s, s.p50_e2el_ms / 1000, 0.05, 'window start');
  assert.ok(w.end_s > 5 && w.end_s <= 6.5, JSON.stringify(w));
  // the server keeps up: completions inside the window follow the sends
  near(w.request_throughput, w.sent_rps, 0.2, 'window throughput vs sent');
  // every request asked for 48 tokens and got them
  near(w.output_throughput, 48 * w.request_throughput, 0.02, 'window tokens');
  // vLLM's figure has the drain in its duration
  assert.ok(s.request_throughput < w.request_throughput * 1.05, `${s.request_throughput} vs ${w.request_throughput}`);
  // the console says which is which
  assert.match(r.stdout, /steady window \d+\.\d-\d+\.\d s/);
  assert.match(r.stdout, /whole run with its drain \(vLLM's\): \d+\.\d\d req\/s/);
});

test('closed loop after a warm-up: Little\'s law, users over the mean request time', async () => {
  const out = path.join(tmp, 'closed');
  const r = await runBin(['run', '--target', sim.base, '--concurrency', '4', '--warmup', '2s',
    '--duration', '6s', '--output-len', 'fixed:64', '--goodput', 'e2el:60000', '--out', out]);
  assert.equal(r.code, 0, r.stderr);
  const doc = readJson(path.join(out, 'result.json'));
  const s = doc.summary;
  const w = s.window;
  assert.equal(w.method, 'steady_window', JSON.stringify(w));
  assert.ok(w.start_s >= 2, JSON.stringify(w));
  near(w.request_throughput, 4 / (s.mean_e2el_ms / 1000), 0.15, 'closed-loop throughput');
  near(w.output_throughput, 64 * w.request_throughput, 0.02, 'window tokens');
  // every request is good under a 60-s E2EL bound: goodput is the throughput
  near(w.request_goodput, w.request_throughput, 1e-9, 'goodput');
  // warm-up requests that ended after the warm-up are counted on the timeline
  assert.ok(doc.warmup.requests > 0 && doc.warmup.output_tokens >= 64 * doc.warmup.ok, JSON.stringify(doc.warmup));
});

test('a run by count: sending ends with the last request sent', async () => {
  const out = path.join(tmp, 'count');
  const r = await runBin(['run', '--target', sim.base, '--rate', '25', '--requests', '100',
    '--output-len', 'fixed:32', '--out', out]);
  assert.equal(r.code, 0, r.stderr);
  const w = readJson(path.join(out, 'result.json')).summary.window;
  assert.ok(w.send_end_s > 2 && w.send_end_s < 6.5, JSON.stringify(w));
  assert.equal(w.method, 'steady_window', JSON.stringify(w));
  near(w.request_throughput, w.sent_rps, 0.25, 'window throughput vs sent');
});
