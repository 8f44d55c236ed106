// `tokenstorm run --endpoint realtime` against the simulator's /v1/realtime:
// the same result schema as SSE, tokens from usage, first-delta timing against
// the simulator's trace log, refusals and integrity counts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSim, runBin, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-realtime-'));
const trace = path.join(tmp, 'trace.jsonl');
let sim;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--trace-log', trace, '--api-key', 'sk-rt']);
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const run = (args, opts) => runBin(['run', ...args], opts);
const readJsonl = (f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

test('realtime: tokens from usage, first delta timed against the trace log', async () => {
  const out = path.join(tmp, 'truth');
  const r = await run(['--target', sim.base, '--endpoint', 'realtime', '--api-key', 'sk-rt', '--rate', '25',
    '--requests', '30', '--input-len', 'fixed:64', '--output-len', 'fixed:12', '--save-requests',
    '--out', out, '--seed', '3', '-q', '--workers', '2']);
  assert.equal(r.code, 0, r.stderr);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  assert.equal(result.run.endpoint, 'realtime');
  assert.match(result.run.target, /^ws:\/\/127\.0\.0\.1:\d+\/v1\/realtime\?model=/);
  assert.equal(result.summary.completed, 30);
  assert.equal(result.summary.total_output_tokens, 30 * 12);
  assert.equal(result.streams.after_done, 0);
  assert.equal(result.streams.out_of_order, 0);
  assert.equal(result.streams.bad_close, 0);
  assert.equal(result.streams.no_done, 0);
  const reqs = readJsonl(path.join(out, 'requests.jsonl'));
  assert.equal(reqs.length, 30);
  const runId = result.run.run_id;
  const origin = result.run.start_mono_ns;
  let truth = [];
  for (let i = 0; i < 30 && truth.length < 30; i++) {
    await sleep(100); // the trace log is flushed every 200 ms
    truth = readJsonl(trace).filter((t) => t.request_id.startsWith(`ts-${runId}-`));
  }
  assert.equal(truth.length, 30, 'the simulator saw every response exactly once');
  const byId = new Map(truth.map((t) => [Number(t.request_id.split('-')[2]), t]));
  for (const q of reqs) {
    assert.equal(q.outcome, 'ok', q.error);
    assert.equal(q.http_status, 101);
    assert.equal(q.token_source, 'usage');
    assert.equal(q.usage_completion_tokens, 12);
    const t = byId.get(q.id);
    assert.ok(t, `no trace for request ${q.id}`);
    assert.equal(t.endpoint, 'realtime');
    assert.equal(q.content_chunks, t.token_ns.length);
    assert.equal(q.finish_reason, 'length');
    // as for SSE (run.test.mjs): the delta is seen after its step, within 25 ms of its write
    const clientFirst = origin + q.first_chunk_ms * 1e6;
    const d = clientFirst - t.token_ns[0];
    assert.ok(clientFirst - t.first_token_ns > -1e6 && d < 25e6,
      `first delta seen ${d / 1e6} ms after it was written`);
  }
});

test('realtime: a refused upgrade is an http_4xx with the server\'s message; exit 3', async () => {
  const out = path.join(tmp, 'refused');
  // --model: no model list (it would be refused first)
  const r = await run(['--target', sim.base, '--endpoint', 'realtime', '--api-key', 'sk-wrong',
    '--model', 'tokenstorm/tiny', '--requests', '3', '--output-len', 'fixed:4', '--out', out, '-q']);
  assert.equal(r.code, 3, r.stderr);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  assert.equal(result.outcomes.http_4xx, 3);
  assert.match(r.stderr, /Incorrect API key/);
});

test('realtime: --no-stream and an https target are refused up front', async () => {
  let r = await run(['--target', sim.base, '--endpoint', 'realtime', '--no-stream', '--requests', '1']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /always streams/);
  r = await run(['--target', 'https://127.0.0.1:1', '--endpoint', 'realtime', '--model', 'm', '--requests', '1']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /wss:\/\//);
});

test('realtime: the embedded simulator needs no target', async () => {
  const out = path.join(tmp, 'embedded');
  const r = await run(['--endpoint', 'realtime', '--requests', '8', '--concurrency', '4',
    '--output-len', 'fixed:5', '--input-len', 'fixed:20', '--out', out, '-q']);
  assert.equal(r.code, 0, r.stderr);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  assert.equal(result.summary.completed, 8);
  assert.equal(result.summary.total_output_tokens, 40);
});
