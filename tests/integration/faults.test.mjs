// Each fault family through a real `tokenstorm proxy` in front of the real
// simulator, with load from `tokenstorm run`: the documented effect is
// measured in the run's outcomes (requests.jsonl, result.json).
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { BIN, startSim, startServer, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-faults-'));
const qa = [
  ['What is the capital of France?', 'The capital of France is Paris, a city of 2100000 people.'],
  ['Who wrote Hamlet?', 'Hamlet was written by William Shakespeare in 1600.'],
];
const prompts = path.join(tmp, 'prompts.jsonl');
fs.writeFileSync(prompts, qa.map(([p, r]) => JSON.stringify({ prompt: p, reference: r })).join('\n') + '\n');
const answers = path.join(tmp, 'answers.jsonl');
fs.writeFileSync(answers, qa.map(([p, a]) => JSON.stringify({ prompt: p, answer: a })).join('\n') + '\n');

let sim;
let proxy;
let api;
let seq = 0;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--seed', '3', '--answers', answers]);
  proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--seed', '11']);
  for (let i = 0; i < 100 && !/control API on http/.test(proxy.output); i++) await sleep(20);
  const m = proxy.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/);
  assert.ok(m, proxy.output);
  api = m[1];
});
after(async () => {
  if (proxy) await proxy.stop('SIGKILL');
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});
afterEach(async () => {
  const res = await fetch(api + '/reset', { method: 'POST', signal: AbortSignal.timeout(5000) });
  assert.ok(res.status < 300);
});

async function addFault(spec) {
  const res = await fetch(api + '/faults', { method: 'POST', body: JSON.stringify(spec), signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  assert.equal(res.status, 201, text);
}

// `tokenstorm run` against the proxy; resolves with the requests and result.
function load(args, { timeoutMs = 30000, target = proxy.base } = {}) {
  const out = path.join(tmp, `run${++seq}`);
  return new Promise((resolve) => {
    const p = spawn(BIN, ['run', '--target', target, '--model', 'tokenstorm/tiny', '--save-requests',
      '--out', out, '-q', '--seed', '5', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    p.stdout.on('data', (d) => { log += d; });
    p.stderr.on('data', (d) => { log += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code) => {
      clearTimeout(t);
      const reqs = fs.readFileSync(path.join(out, 'requests.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
      const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
      resolve({ code, log, reqs, result });
    });
  });
}

const mean = (a) => a.reduce((s, v) => s + v, 0) / a.length;
const every = (r, outcome) => {
  assert.ok(r.reqs.length > 0, r.log);
  for (const q of r.reqs) assert.equal(q.outcome, outcome, JSON.stringify(q));
};

test('sse_truncate after 7 tokens: every stream truncated with exactly 7 content chunks', async () => {
  await addFault({ name: 'cut7', type: 'sse_truncate', after_tokens: 7, cut: 'close' });
  const r = await load(['--rate', '40', '--requests', '12', '--output-len', 'fixed:20']);
  every(r, 'truncated');
  for (const q of r.reqs) assert.equal(q.content_chunks, 7, JSON.stringify(q));
});

test('http_abort 429 with Retry-After: every request counted as http_429', async () => {
  await addFault({ name: 'storm', type: 'http_abort', status: 429, retry_after: '2s' });
  const r = await load(['--rate', '40', '--requests', '10', '--output-len', 'fixed:4']);
  every(r, 'http_429');
  for (const q of r.reqs) assert.equal(q.http_status, 429);
});

test('sse_jitter normal 20ms σ 5ms: ITL mean and σ within tolerance', async () => {
  await addFault({ name: 'jit', type: 'sse_jitter', delay: 'normal:20ms,5ms' });
  const r = await load(['--rate', '10', '--requests', '8', '--output-len', 'fixed:20']);
  every(r, 'ok');
  // per-request gaps between content chunks: the simulator's ~1 ms plus the jitter
  const m = mean(r.reqs.map((q) => q.itl_mean_ms));
  assert.ok(m > 18.5 && m < 24, `ITL mean ${m}`);
  const itl = r.result.latency.itl;
  assert.ok(itl.mean > 17 && itl.mean < 24, `itl ${JSON.stringify(itl)}`);
  assert.ok(itl.std > 3.5 && itl.std < 8, `itl σ ${JSON.stringify(itl)}`);
});

// sse_jitter against an upstream of a known gap (the simulator with a 20 ms
// step): "add" adds the delay to each gap, "floor" makes each gap at least
// the delay. Medians of the per-request ITL means, compared with the same
// run without the fault, with bounds a busy machine keeps.
test('sse_jitter: add puts the delay on top of the upstream gap, floor makes it a minimum', { timeout: 60000 }, async () => {
  const slow = await startSim(['--profile', 'tiny', '--no-noise', '--seed', '3', '--set', 't_w_ms=20']);
  const px = await startServer(['proxy', '--upstream', slow.base, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--seed', '11']);
  try {
    for (let i = 0; i < 100 && !/control API on http/.test(px.output); i++) await sleep(20);
    const papi = px.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
    const median = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
    const itl = async (spec) => {
      await fetch(papi + '/reset', { method: 'POST', signal: AbortSignal.timeout(5000) });
      if (spec) {
        const res = await fetch(papi + '/faults', { method: 'POST', body: JSON.stringify(spec), signal: AbortSignal.timeout(5000) });
        assert.equal(res.status, 201, await res.text());
      }
      const r = await load(['--rate', '10', '--requests', '8', '--output-len', 'fixed:20'], { target: px.base });
      every(r, 'ok');
      return median(r.reqs.map((q) => q.itl_mean_ms));
    };
    const base = await itl(null);
    const add = await itl({ name: 'jit', type: 'sse_jitter', delay: 'normal:20ms,5ms' });
    const floor = await itl({ name: 'jit', type: 'sse_jitter', delay: 'normal:20ms,5ms', mode: 'floor' });
    const msg = `ITL medians: upstream ${base}, add ${add}, floor ${floor}`;
    assert.ok(base > 15 && base < 40, msg);
    assert.ok(add - base > 12 && add - base < 32, msg); // about +20 ms
    assert.ok(floor - base > -4 && floor - base < 9, msg); // about max(20, 20 ± 5) ≈ 22
    assert.ok(add - floor > 10, msg);
  } finally {
    await px.stop('SIGKILL');
    await slow.stop('SIGKILL');
  }
});

test('sse_drop_done, sse_malformed, sse_error_event: truncated, malformed, stream_error', async () => {
  await addFault({ name: 'nodone', type: 'sse_drop_done' });
  let r = await load(['--rate', '40', '--requests', '6', '--output-len', 'fixed:6']);
  for (const q of r.reqs) assert.equal(q.no_done, true, JSON.stringify(q));
  // finish_reason still comes: only the missing [DONE] tells, and the run says so
  for (const q of r.reqs) assert.equal(q.no_finish, false, JSON.stringify(q));
  assert.equal(r.result.streams.no_finish, 0, JSON.stringify(r.result.streams));
  assert.equal(r.result.streams.no_done, 6, JSON.stringify(r.result.streams));
  every(r, 'truncated');
  await fetch(api + '/reset', { method: 'POST' });
  await addFault({ name: 'bad', type: 'sse_malformed', after_events: 2 });
  r = await load(['--rate', '40', '--requests', '6', '--output-len', 'fixed:6']);
  every(r, 'malformed');
  await fetch(api + '/reset', { method: 'POST' });
  await addFault({ name: 'err', type: 'sse_error_event', after_events: 2 });
  r = await load(['--rate', '40', '--requests', '6', '--output-len', 'fixed:6']);
  every(r, 'stream_error');
});

test('sse_error_event with a text: an OpenAI error object carrying it (stream_error); raw: true sends the text itself (malformed)', async () => {
  const text = 'model "tiny" overloaded, try later';
  await addFault({ name: 'err', type: 'sse_error_event', after_events: 2, text });
  // the event's data is a valid OpenAI error object with the text as its message
  // (a connection of its own, closed after: TCP faults of later tests are
  // rolled per connection and must not find this one kept alive)
  const sse = await new Promise((resolve, reject) => {
    const req = http.request(proxy.base + '/v1/chat/completions', { method: 'POST', agent: false, timeout: 10000,
      headers: { 'content-type': 'application/json', connection: 'close' } }, (res) => {
      let t = '';
      res.on('data', (d) => { t += d; });
      res.on('end', () => resolve(t));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(JSON.stringify({ model: 'tokenstorm/tiny', stream: true, max_tokens: 6, messages: [{ role: 'user', content: 'hi' }] }));
  });
  const events = sse.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
  const err = events.map((d) => { try { return JSON.parse(d); } catch { return null; } }).find((j) => j?.error);
  assert.ok(err, events.join('\n'));
  assert.equal(err.error.message, text);
  assert.equal(typeof err.error.type, 'string');
  let r = await load(['--rate', '40', '--requests', '6', '--output-len', 'fixed:6']);
  every(r, 'stream_error');
  for (const q of r.reqs) assert.ok(JSON.stringify(q).includes('overloaded, try later'), JSON.stringify(q));
  await fetch(api + '/reset', { method: 'POST' });
  await addFault({ name: 'raw', type: 'sse_error_event', after_events: 2, text: 'upstream exploded', raw: true });
  r = await load(['--rate', '40', '--requests', '6', '--output-len', 'fixed:6']);
  every(r, 'malformed');
});

test('tcp_latency 50 ms downstream: TTFT up by about 50 ms', async () => {
  const base = await load(['--rate', '20', '--requests', '10', '--output-len', 'fixed:4']);
  every(base, 'ok');
  await addFault({ name: 'lag', type: 'tcp_latency', delay: '50ms', direction: 'downstream' });
  const r = await load(['--rate', '20', '--requests', '10', '--output-len', 'fixed:4']);
  every(r, 'ok');
  const d = r.result.latency.ttft.mean - base.result.latency.ttft.mean;
  assert.ok(d > 45 && d < 70, `TTFT +${d} ms (${base.result.latency.ttft.mean} -> ${r.result.latency.ttft.mean})`);
});

test('tcp_reset after N bytes and tcp_limit: streams cut by a reset / a close', async () => {
  await addFault({ name: 'rst', type: 'tcp_reset', bytes: 600 });
  let r = await load(['--rate', '20', '--requests', '6', '--output-len', 'fixed:30']);
  for (const q of r.reqs) {
    assert.ok(['truncated', 'recv'].includes(q.outcome), JSON.stringify(q));
    assert.match(String(q.error), /reset by peer/i, JSON.stringify(q));
  }
  await fetch(api + '/reset', { method: 'POST' });
  await addFault({ name: 'lim', type: 'tcp_limit', bytes: 600 });
  r = await load(['--rate', '20', '--requests', '6', '--output-len', 'fixed:30']);
  for (const q of r.reqs) {
    assert.ok(['truncated', 'recv'].includes(q.outcome), JSON.stringify(q));
    assert.doesNotMatch(String(q.error), /reset by peer/i, JSON.stringify(q)); // a FIN, not an RST
  }
});

test('tcp_blackhole: no answer, the client\'s TTFB timeout fires', async () => {
  await addFault({ name: 'hole', type: 'tcp_blackhole' });
  const t0 = Date.now();
  const r = await load(['--rate', '20', '--requests', '4', '--output-len', 'fixed:4', '--timeout-ttfb', '300ms']);
  every(r, 'timeout_ttfb');
  assert.ok(Date.now() - t0 < 10000);
});

test('tcp_bandwidth 20 KB/s: a response takes bytes / rate', async () => {
  const body = JSON.stringify({ model: 'tokenstorm/tiny', stream: true, max_tokens: 60, ignore_eos: true,
    messages: [{ role: 'user', content: 'hello there' }] });
  const direct = await fetch(sim.base + '/v1/chat/completions', { method: 'POST', body,
    headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(10000) });
  const bytes = (await direct.arrayBuffer()).byteLength;
  assert.ok(bytes > 5000, `${bytes}`);
  await addFault({ name: 'slow', type: 'tcp_bandwidth', rate: '20K' });
  const t0 = performance.now();
  const res = await fetch(proxy.base + '/v1/chat/completions', { method: 'POST', body,
    headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(10000) });
  const got = (await res.arrayBuffer()).byteLength;
  const ms = performance.now() - t0;
  const rate = 20 * 1024; // "20K": K is 1024 (src/base/units.h)
  const expect = (got / rate) * 1000;
  assert.ok(Math.abs(got - bytes) < 200, `${got} vs ${bytes}`);
  assert.ok(ms > expect * 0.8 && ms < expect * 1.4 + 100, `${ms} ms for ${got} bytes (expected ~${expect})`);
  const r = await load(['--rate', '4', '--requests', '3', '--output-len', 'fixed:60']);
  every(r, 'ok');
  for (const q of r.reqs) assert.ok(q.e2el_ms > expect * 0.7, JSON.stringify(q));
});

// One POST on a connection of its own (TCP faults are rolled per client
// connection, at its first request): resolves with status, body, ms.
function postFresh(base, body) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const u = new URL(base + '/v1/chat/completions');
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }, timeout: 15000 },
    (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text, ms: performance.now() - t0 }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

test('upstream direction: tcp_bandwidth paces the request, tcp_limit and tcp_reset cut it', async () => {
  // A 6,000-byte prompt: its request at 4 KB/s upstream takes ~1.5 s to reach
  // the simulator; the answer (downstream) is not shaped.
  const body = JSON.stringify({ model: 'tokenstorm/tiny', stream: false, max_tokens: 2, ignore_eos: true,
    messages: [{ role: 'user', content: 'word '.repeat(1200) }] });
  let r0 = await postFresh(proxy.base, body);
  assert.equal(r0.status, 200, r0.text);
  const base = r0.ms;
  await addFault({ name: 'slowup', type: 'tcp_bandwidth', rate: '4K', direction: 'upstream' });
  r0 = await postFresh(proxy.base, body);
  assert.equal(r0.status, 200, r0.text);
  assert.equal(JSON.parse(r0.text).choices[0].finish_reason, 'length');
  const expect = (body.length / 4096) * 1000;
  assert.ok(r0.ms > expect * 0.8 && r0.ms < expect * 1.5 + base + 200, `${r0.ms} ms (expected ~${expect}, unshaped ${base})`);
  await fetch(api + '/reset', { method: 'POST' });
  await addFault({ name: 'cutup', type: 'tcp_limit', bytes: 300, direction: 'upstream' });
  r0 = await postFresh(proxy.base, body);
  assert.equal(r0.status, 502, r0.text);
  assert.match(r0.text, /send shaper after 300 bytes|upstream/i);
  await fetch(api + '/reset', { method: 'POST' });
  await addFault({ name: 'rstup', type: 'tcp_reset', bytes: 300, direction: 'upstream' });
  const r = await load(['--rate', '20', '--requests', '4', '--output-len', 'fixed:4']);
  every(r, 'http_5xx');
  for (const q of r.reqs) assert.equal(q.http_status, 502, JSON.stringify(q));
});

test('llm_hallucinate at rate 1: answer quality drops', async () => {
  const args = ['--prompts', prompts, '--no-ignore-eos', '--output-len', 'fixed:40', '--rate', '20',
    '--requests', '6', '--body', '{"temperature":0}'];
  const base = await load(args);
  assert.equal(base.result.quality?.exact_match_rate ?? base.result.quality?.exact_match, 1, JSON.stringify(base.result.quality));
  await addFault({ name: 'lies', type: 'llm_hallucinate', rate: 1 });
  const r = await load(args);
  every(r, 'ok');
  const q = r.result.quality;
  assert.equal(q.exact_match_rate, 0, JSON.stringify(q));
  assert.ok(q.rouge_l.mean < base.result.quality.rouge_l.mean, JSON.stringify(q));
});
