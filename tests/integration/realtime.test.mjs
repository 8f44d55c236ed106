// `tokenstorm run --endpoint realtime` against the simulator's /v1/realtime:
// the same result schema as SSE, tokens from usage, first-delta timing against
// the simulator's trace log, refusals and integrity counts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
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

test('realtime: --no-stream is refused up front', async () => {
  const r = await run(['--target', sim.base, '--endpoint', 'realtime', '--no-stream', '--requests', '1']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /always streams/);
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

// A chat-only server: the upgrade to /v1/realtime gets 404, chat streams SSE.
function chatOnlyServer() {
  const srv = http.createServer((req, res) => {
    if (req.url.startsWith('/v1/realtime')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'no realtime here', type: 'invalid_request_error' } }));
      return;
    }
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const c = (delta, finish) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(c({ role: 'assistant', content: 'a' }, null));
      res.write(c({ content: 'b' }, null));
      res.write(c({}, 'stop'));
      res.end(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } })}\n\ndata: [DONE]\n\n`);
    });
  });
  srv.on('upgrade', (req, socket) => {
    socket.end('HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 52\r\nConnection: close\r\n\r\n{"error":{"message":"no realtime here","type":"x"}}\n');
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv)));
}

test('realtime --transport auto: a refused upgrade falls back to SSE, counted', async () => {
  const srv = await chatOnlyServer();
  try {
    const base = `http://127.0.0.1:${srv.address().port}`;
    const out = path.join(tmp, 'auto');
    const r = await run(['--target', base, '--model', 'm', '--endpoint', 'realtime', '--transport', 'auto',
      '--requests', '6', '--concurrency', '2', '--workers', '1', '--save-requests', '--out', out, '-q']);
    assert.equal(r.code, 0, r.stderr);
    const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
    assert.equal(result.outcomes.ok, 6);
    assert.equal(result.streams.fell_back_sse, 6);
    assert.equal(result.summary.total_output_tokens, 12);
    const reqs = readJsonl(path.join(out, 'requests.jsonl'));
    assert.ok(reqs.every((q) => q.fell_back_sse === true && q.http_status === 200));
    // without auto the same server fails every request with the server's 404
    const out2 = path.join(tmp, 'noauto');
    const r2 = await run(['--target', base, '--model', 'm', '--endpoint', 'realtime', '--requests', '2',
      '--out', out2, '-q']);
    assert.equal(r2.code, 3);
    assert.match(r2.stderr, /no realtime here/);
    // --transport is refused without --endpoint realtime, and with a bad value
    assert.equal((await run(['--target', base, '--transport', 'auto', '--requests', '1'])).code, 2);
    assert.equal((await run(['--target', base, '--endpoint', 'realtime', '--transport', 'x', '--requests', '1'])).code, 2);
  } finally {
    srv.close();
  }
});

test('realtime --integrity hmac: every delta signed and verified; a wrong key shows as forgeries', async () => {
  const signed = await startSim(['--profile', 'tiny', '--no-noise', '--sign-chunks', 'k3y']);
  try {
    const base = ['--target', signed.base, '--endpoint', 'realtime', '--rate', '20', '--requests', '6',
      '--output-len', 'fixed:9', '-q', '--integrity', 'hmac'];
    const good = await run([...base, '--integrity-key', 'k3y', '--out', path.join(tmp, 'rsig1')]);
    assert.equal(good.code, 0, good.stderr);
    const g = JSON.parse(fs.readFileSync(path.join(tmp, 'rsig1', 'result.json'), 'utf8'));
    assert.equal(g.integrity.streams, 6);
    assert.equal(g.integrity.streams_violated, 0);
    assert.equal(g.integrity.chunks_ok, 6 * 9); // one signature per delta
    const bad = await run([...base, '--integrity-key', 'wrong', '--out', path.join(tmp, 'rsig2')]);
    assert.equal(bad.code, 0, bad.stderr);
    const b = JSON.parse(fs.readFileSync(path.join(tmp, 'rsig2', 'result.json'), 'utf8'));
    assert.equal(b.integrity.streams_violated, 6);
    assert.equal(b.integrity.forged, 6 * 9);
  } finally {
    await signed.stop('SIGKILL');
  }
});

test('scenario: a realtime class beside a chat class; a realtime flow is refused', async () => {
  const file = path.join(tmp, 'mix.yaml');
  fs.writeFileSync(file, `name: rt-mix
seed: 5
classes:
  - name: voice
    endpoint: realtime
    users: 3
    requests: 9
    input_tokens: fixed:20
    output_tokens: fixed:6
  - name: web
    endpoint: chat
    users: 2
    requests: 4
    input_tokens: fixed:20
    output_tokens: fixed:4
`);
  const out = path.join(tmp, 'mix');
  const r = await run([file, '--save-requests', '--out', out, '-q']);
  assert.equal(r.code, 0, r.stderr);
  const reqs = readJsonl(path.join(out, 'requests.jsonl'));
  const voice = reqs.filter((q) => q.class === 'voice');
  const web = reqs.filter((q) => q.class === 'web');
  assert.equal(voice.length, 9);
  assert.equal(web.length, 4);
  assert.ok(voice.every((q) => q.http_status === 101 && q.outcome === 'ok' && q.output_tokens === 6));
  assert.ok(web.every((q) => q.http_status === 200 && q.outcome === 'ok'));
  const bad = path.join(tmp, 'flow.yaml');
  fs.writeFileSync(bad, `name: bad
classes:
  - name: a
    endpoint: realtime
    users: 1
    flow:
      steps:
        - name: s
          kind: chat
          body: {messages: [{role: user, content: hi}]}
`);
  const b = await run([bad, '--check']);
  assert.equal(b.code, 2);
  assert.match(b.stderr, /realtime' is for plain and session classes/);
});

test('realtime: the simulator\'s admin faults apply (error_rate on the upgrade, stall between deltas)', async () => {
  const s = await startSim(['--profile', 'tiny', '--no-noise', '--admin']);
  try {
    const admin = s.base + '/admin/faults';
    const post = (body) => fetch(admin, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal((await post({ type: 'error_rate', rate: 1, status: 503 })).status, 201);
    const out = path.join(tmp, 'adm1');
    let r = await run(['--target', s.base, '--endpoint', 'realtime', '--requests', '3', '--output-len', 'fixed:4', '--out', out, '-q']);
    assert.equal(r.code, 3);
    const res = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
    assert.equal(res.outcomes.http_5xx, 3);
    assert.equal((await fetch(admin + '/error_rate', { method: 'DELETE' })).status, 204);
    // a stall of the engine holds the deltas of a response in flight
    const out2 = path.join(tmp, 'adm2');
    const running = run(['--target', s.base, '--endpoint', 'realtime', '--requests', '1', '--output-len', 'fixed:2000',
      '--save-requests', '--out', out2, '-q']);
    await sleep(300);
    assert.equal((await post({ type: 'stall', for: '600ms' })).status, 201);
    r = await running;
    assert.equal(r.code, 0, r.stderr);
    const q = readJsonl(path.join(out2, 'requests.jsonl'))[0];
    assert.equal(q.outcome, 'ok');
    // a 600 ms gap: between deltas, or before the first if the run started late
    assert.ok(Math.max(q.itl_max_ms, q.ttft_ms) >= 400, `longest gap ${q.itl_max_ms} ms, TTFT ${q.ttft_ms} ms`);
  } finally {
    await s.stop('SIGKILL');
  }
});
