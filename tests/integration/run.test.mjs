// `tokenstorm run` against the real simulator and against a deliberately
// broken server: counts, tokens and timings against the simulator's ground
// truth; every request in the right outcome; SLO and interrupt exit codes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-run-'));
let sim;
const trace = path.join(tmp, 'trace.jsonl');

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--trace-log', trace]);
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

// Runs `tokenstorm run ARGS`; resolves with { code, stdout, stderr }.
const run = (args, opts) => runBin(['run', ...args], opts);

const readJsonl = (f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

test('counts, tokens and timings match the simulator ground truth', async () => {
  const out = path.join(tmp, 'truth');
  const r = await run(['--target', sim.base, '--rate', '25', '--requests', '40', '--input-len', 'fixed:64',
    '--output-len', 'fixed:16', '--save-requests', '--out', out, '--seed', '7', '-q', '--workers', '2']);
  assert.equal(r.code, 0, r.stderr);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  assert.equal(result.schema, 'tokenstorm.result/1');
  assert.equal(result.summary.completed, 40);
  assert.equal(result.summary.total_output_tokens, 40 * 16);
  const reqs = readJsonl(path.join(out, 'requests.jsonl'));
  assert.equal(reqs.length, 40);
  const runId = result.run.run_id;
  const origin = result.run.start_mono_ns;
  let truth = [];
  for (let i = 0; i < 30 && truth.length < 40; i++) {
    await sleep(100); // the trace log is flushed every 200 ms
    truth = readJsonl(trace).filter((t) => t.request_id.startsWith(`ts-${runId}-`));
  }
  assert.equal(truth.length, 40, 'the simulator saw every request exactly once');
  const byId = new Map(truth.map((t) => [Number(t.request_id.split('-')[2]), t]));
  for (const q of reqs) {
    assert.equal(q.outcome, 'ok');
    const t = byId.get(q.id);
    assert.ok(t, `no trace for request ${q.id}`);
    assert.equal(q.output_tokens, t.output_tokens);
    assert.equal(q.usage_completion_tokens, 16);
    assert.equal(q.content_chunks, t.token_ns.length);
    // client-measured first token vs the simulator's write of it (same monotonic clock).
    // The client times bytes by their kernel arrival; the simulator stamps a token
    // after its write returns (token_ns), which on a busy machine can be ms after
    // the bytes were delivered, so the lower bound is the step that produced it
    // (first_token_ns) and, for the last token, its write stamp minus 5 ms.
    const clientFirst = origin + q.first_chunk_ms * 1e6;
    const d = clientFirst - t.token_ns[0];
    assert.ok(clientFirst - t.first_token_ns > -1e6 && d < 25e6,
      `first token seen ${d / 1e6} ms after it was written (${(clientFirst - t.first_token_ns) / 1e6} ms after its step)`);
    const clientEnd = origin + q.last_chunk_ms * 1e6;
    const dEnd = clientEnd - t.token_ns.at(-1);
    assert.ok(dEnd > -5e6 && dEnd < 25e6, `last token seen ${dEnd / 1e6} ms after it was written`);
  }
  // the interval log is in the standard HdrHistogram format
  const hlog = fs.readFileSync(path.join(out, 'latency.hlog'), 'utf8');
  assert.match(hlog, /^#\[Histogram log format version 1\.3\]/m);
  assert.match(hlog, /^Tag=ttft,/m);
});

test('closed loop: users, think time, a request count', async () => {
  const out = path.join(tmp, 'closed');
  const r = await run(['--target', sim.base + '/v1', '--concurrency', '4', '--requests', '20', '--think', 'fixed:0.01',
    '--output-len', 'fixed:8', '--input-len', 'fixed:32', '--out', out, '-q']);
  assert.equal(r.code, 0, r.stderr);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  assert.equal(result.summary.completed, 20);
  assert.equal(result.run.mode, 'closed');
});

test('SLO verdicts set the exit code; bad expressions are usage errors', async () => {
  const base = ['--target', sim.base, '--rate', '20', '--requests', '10', '--output-len', 'fixed:4', '-q'];
  const pass = await run([...base, '--out', path.join(tmp, 'slo1'), '--slo', 'ttft.p99<60s', '--slo', 'error_rate<1%']);
  assert.equal(pass.code, 0, pass.stdout + pass.stderr);
  assert.match(pass.stdout, /ttft\.p99<60s/);
  const fail = await run([...base, '--out', path.join(tmp, 'slo2'), '--slo', 'ttft.p50<0.001ms']);
  assert.equal(fail.code, 1, fail.stdout + fail.stderr);
  const bad = await run([...base, '--out', path.join(tmp, 'slo3'), '--slo', 'ttft.p95<<2s']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /slo/i);
});

test('Ctrl-C stops, accounts for requests in flight and writes results', async () => {
  const out = path.join(tmp, 'sigint');
  const r = await run(['--target', sim.base, '--rate', '20', '--duration', '60s', '--output-len', 'fixed:2000',
    '--out', out, '-q', '--save-requests'], {
    onStart: (p) => setTimeout(() => p.kill('SIGINT'), 1500),
  });
  assert.equal(r.code, 130, r.stderr);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  const reqs = readJsonl(path.join(out, 'requests.jsonl'));
  const started = reqs.length;
  assert.ok(started > 10);
  const outcomes = Object.values(result.outcomes).reduce((a, b) => a + b, 0);
  assert.equal(outcomes, started, 'every request started is in exactly one outcome');
  assert.ok(result.outcomes.cut > 0);
  assert.equal(result.run.end_mode, 'cut');
});

// A server that misbehaves by request index (from X-Request-Id): each kind
// of failure must land in its own outcome.
function brokenServer() {
  const kinds = ['ok', 'cut', '500', 'malformed', '429', 'no_done', 'silent', 'error_event'];
  const chunk = (obj) => `data: ${JSON.stringify(obj)}\n\n`;
  const base = { id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'm' };
  const content = (t) => chunk({ ...base, choices: [{ index: 0, delta: { content: t }, finish_reason: null }] });
  const finish = chunk({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
  const server = http.createServer((req, res) => {
    const idx = Number((req.headers['x-request-id'] || '').split('-')[2]);
    const kind = kinds[idx % kinds.length];
    req.resume();
    req.on('end', () => {
      const sse = () => res.writeHead(200, { 'content-type': 'text/event-stream' });
      switch (kind) {
        case 'ok': sse(); res.end(content('a') + content('b') + finish + 'data: [DONE]\n\n'); break;
        case 'cut': sse(); res.write(content('a')); setTimeout(() => res.socket.destroy(), 20); break;
        case '500': res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'boom', type: 'server_error', param: null, code: 'internal' } })); break;
        case 'malformed': sse(); res.end(content('a') + 'data: {"id": nope\n\n' + finish + 'data: [DONE]\n\n'); break;
        case '429': res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' });
          res.end(JSON.stringify({ error: { message: 'slow down', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' } })); break;
        case 'no_done': sse(); res.end(content('a') + finish); break;
        case 'silent': setTimeout(() => res.destroy(), 3000); break;
        case 'error_event': sse(); res.end(content('a') + chunk({ error: { message: 'overloaded', type: 'server_error', code: 'overloaded' } }) + 'data: [DONE]\n\n'); break;
      }
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, kinds })));
}

test('against a broken server every request lands in the right outcome', async () => {
  const { server, kinds } = await brokenServer();
  const port = server.address().port;
  const out = path.join(tmp, 'broken');
  try {
    const r = await run(['--target', `http://127.0.0.1:${port}`, '--model', 'm', '--rate', '40', '--requests', '32',
      '--timeout-ttfb', '500ms', '--save-requests', '--out', out, '-q']);
    assert.equal(r.code, 0, r.stderr);
    const reqs = readJsonl(path.join(out, 'requests.jsonl'));
    assert.equal(reqs.length, 32);
    const expected = { ok: 'ok', cut: 'truncated', 500: 'http_5xx', malformed: 'malformed', 429: 'http_429',
      no_done: 'truncated', silent: 'timeout_ttfb', error_event: 'stream_error' };
    for (const q of reqs) {
      const kind = kinds[q.id % kinds.length];
      assert.equal(q.outcome, expected[kind], `request ${q.id} (${kind}): ${JSON.stringify(q)}`);
    }
    const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
    assert.equal(result.summary.completed, 4);
    assert.equal(result.outcomes.http_429, 4);
  } finally {
    server.close();
    server.closeAllConnections();
  }
});

test('--integrity hmac verifies every signed chunk; a wrong key shows as forgeries', async () => {
  const signed = await startSim(['--profile', 'tiny', '--no-noise', '--sign-chunks', 'k3y']);
  try {
    const base = ['--target', signed.base, '--rate', '20', '--requests', '10', '--output-len', 'fixed:12', '-q',
      '--integrity', 'hmac'];
    const good = await run([...base, '--integrity-key', 'k3y', '--out', path.join(tmp, 'sig1')]);
    assert.equal(good.code, 0, good.stderr);
    const g = JSON.parse(fs.readFileSync(path.join(tmp, 'sig1', 'result.json'), 'utf8'));
    assert.equal(g.integrity.streams, 10);
    assert.equal(g.integrity.streams_violated, 0);
    // role + 12 content + finish + usage + [DONE] events per stream
    assert.equal(g.integrity.chunks_ok, 10 * 16);
    const bad = await run([...base, '--integrity-key', 'wrong', '--out', path.join(tmp, 'sig2')]);
    assert.equal(bad.code, 0, bad.stderr);
    const b = JSON.parse(fs.readFileSync(path.join(tmp, 'sig2', 'result.json'), 'utf8'));
    assert.equal(b.integrity.streams_violated, 10);
    assert.equal(b.integrity.forged, 10 * 16);
    const nokey = await run([...base, '--out', path.join(tmp, 'sig3')]);
    assert.equal(nokey.code, 2);
  } finally {
    await signed.stop('SIGKILL');
  }
});
