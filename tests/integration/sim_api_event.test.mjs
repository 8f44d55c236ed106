// The live simulator applies the API server's cost per streamed event
// (api_ms_per_event) as the offline model does: one serial queue shared by
// every stream, tokens written when the modelled server has sent them.
// Server-side write times (--trace-log) give exact lower bounds (a token is
// never written before the model says); upper bounds are wide (busy machine).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSim, runBin, sleep } from './lib.mjs';

const EVENT_MS = 12; // the API server's cost per streamed token event
const SLACK_MS = 0.1; // the live server writes what is due within 0.1 ms in one wake-up
let sim;
let model;
let tmp;
let traceLog;

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-apiev-'));
  traceLog = path.join(tmp, 'trace.jsonl');
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--set', `api_ms_per_event=${EVENT_MS}`,
    '--trace-log', traceLog]);
  model = (await (await fetch(sim.base + '/v1/models')).json()).data[0].id;
});

after(async () => {
  if (sim) await sim.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// One streamed chat request of exactly `tokens` output tokens; client-side times.
async function stream(tokens, id) {
  const t0 = performance.now();
  const res = await fetch(sim.base + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({ model, stream: true, max_tokens: tokens, ignore_eos: true,
      messages: [{ role: 'user', content: 'Say something about queues.' }] }),
  });
  assert.equal(res.status, 200);
  const text = await res.text();
  assert.match(text, /data: \[DONE\]/);
  return { e2eMs: performance.now() - t0 };
}

// The --trace-log line of request `id` (written asynchronously: polled, bounded).
async function traced(id) {
  for (let i = 0; i < 100; i++) {
    const lines = fs.existsSync(traceLog) ? fs.readFileSync(traceLog, 'utf8').split('\n') : [];
    const line = lines.find((l) => l.includes(`"request_id":"${id}"`));
    if (line) return JSON.parse(line);
    await sleep(50);
  }
  throw new Error(`no trace line for ${id}`);
}

test('a stream\'s tokens leave one event cost apart, as the serial queue says', async () => {
  const N = 20;
  const { e2eMs } = await stream(N, 'one');
  const t = await traced('one');
  assert.equal(t.token_ns.length, N);
  // the engine yields a token every ~1 ms; the queue lets one out every 12 ms:
  // token i is sent (i + 1) event costs after the arrival at the earliest
  // (a write may be late on a busy machine, never early)
  t.token_ns.forEach((v, i) => {
    const at = (v - t.arrival_ns) / 1e6;
    assert.ok(at >= (i + 1) * EVENT_MS - SLACK_MS, `token ${i} written at ${at} ms`);
  });
  const gaps = t.token_ns.slice(1).map((v, i) => (v - t.token_ns[i]) / 1e6);
  const span = (t.token_ns[N - 1] - t.arrival_ns) / 1e6;
  const model = N * EVENT_MS; // first token after its prefill step (~3 ms) and one event, then N-1 events
  assert.ok(span >= model - 1, `last token at ${span} ms, model >= ${model}`);
  assert.ok(span <= model * 1.5 + 300, `last token at ${span} ms, model ~${model}`);
  assert.ok(e2eMs >= model - 1, `client E2E ${e2eMs} ms`);
  // ITL as the client's summary would see it: the median gap is the event cost
  const med = gaps.sort((a, b) => a - b)[Math.floor(gaps.length / 2)];
  assert.ok(med < EVENT_MS * 1.5 + 20, `median gap ${med} ms`);
});

test('concurrent streams share the one queue: their events are serialised', async () => {
  const N = 15;
  const ids = ['s0', 's1', 's2'];
  await Promise.all(ids.map((id) => stream(N, id)));
  const ts = await Promise.all(ids.map(traced));
  const start = Math.min(...ts.map((t) => t.arrival_ns));
  const end = Math.max(...ts.map((t) => t.token_ns[N - 1]));
  const span = (end - start) / 1e6;
  const model = ids.length * N * EVENT_MS; // 45 events, one queue
  assert.ok(span >= model - 1, `the last of 3 x ${N} tokens at ${span} ms, model >= ${model}`);
  assert.ok(span <= model * 1.5 + 300, `the last token at ${span} ms, model ~${model}`);
  // the k-th write of any stream is k event costs after the first arrival at the earliest
  const all = ts.flatMap((t) => t.token_ns).sort((a, b) => a - b);
  all.forEach((v, k) => {
    const at = (v - start) / 1e6;
    assert.ok(at >= (k + 1) * EVENT_MS - SLACK_MS, `write ${k} at ${at} ms`);
  });
});

test('live and offline agree: the offline model fitted to a live run finds the event cost again',
  { timeout: 120000 }, async () => {
    // a second simulator whose queue, not its engine, sets the pace: 3 ms per
    // event against ~1 ms steps. One user: deterministic, no ordering effects.
    const hidden = 3;
    const live = await startSim(['--profile', 'tiny', '--no-noise', '--set', `api_ms_per_event=${hidden}`]);
    const out = path.join(tmp, 'c1');
    try {
      const r = await runBin(['run', '--target', live.base, '--concurrency', '1', '--requests', '12',
        '--input-len', 'fixed:200', '--output-len', 'fixed:30', '--out', out, '-q'], { timeoutMs: 60000 });
      assert.equal(r.code, 0, r.stderr);
    } finally {
      await live.stop();
    }
    const yaml = path.join(tmp, 'fit.yaml');
    // start the fit from a wrong value; the offline model must move it back to the live one
    const f = await runBin(['sim', 'calibrate', '--profile', 'tiny', '--set', 'api_ms_per_event=1',
      '--fit', 'api_ms_per_event', '--max-evals', '60', '-o', yaml, out], { timeoutMs: 60000 });
    assert.equal(f.code, 0, f.stderr);
    const text = fs.readFileSync(yaml, 'utf8');
    const got = Number(text.match(/^api_ms_per_event: ([0-9.e+-]+)$/m)[1]);
    assert.ok(Math.abs(got / hidden - 1) < 0.15, `fitted api_ms_per_event ${got}, live ${hidden}\n${text}`);
    // and at that value the model's TPOT and tokens/s are the live ones
    for (const metric of ['tpot_p50_ms', 'output_tok_s']) {
      const m = text.match(new RegExp(`${metric}\\s+([0-9.]+)\\s+([0-9.]+)\\s+([+-][0-9.]+)%`));
      assert.ok(m, `${metric} row\n${text}`);
      assert.ok(Math.abs(Number(m[3])) < 15, `${metric}: measured ${m[1]}, model ${m[2]}\n${text}`);
    }
  });

test('a client that leaves while its tokens wait in the queue is dropped cleanly', async () => {
  const ac = new AbortController();
  const res = await fetch(sim.base + '/v1/chat/completions', {
    method: 'POST', signal: ac.signal,
    headers: { 'content-type': 'application/json', 'x-request-id': 'gone' },
    body: JSON.stringify({ model, stream: true, max_tokens: 40, ignore_eos: true,
      messages: [{ role: 'user', content: 'Leave early.' }] }),
  });
  const reader = res.body.getReader();
  await reader.read(); // the first token; 39 more are queued (~470 ms)
  ac.abort();
  const t = await traced('gone');
  assert.equal(t.status, 'cancelled');
  assert.ok(t.token_ns.length < 40);
  // the server goes on serving
  await stream(3, 'after');
  assert.equal((await traced('after')).status, 'finished');
});
