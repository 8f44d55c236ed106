// `tokenstorm proxy` in front of the real simulator (and of a byte server):
// passthrough integrity, a 429 storm seen by `tokenstorm run`, and the
// control API changing faults while a run is going on. The shared proxy runs
// two loop threads (--threads 2): every check here holds whichever thread
// serves a connection (faults.test.mjs covers the default single loop).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { BIN, runBin, startSim, startServer, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-proxy-'));
let sim;
let proxy;
let api;

// Starts a proxy in front of upstream; resolves with the server plus .api (control URL).
async function startProxy(upstream, extra = []) {
  const p = await startServer(['proxy', '--upstream', upstream, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--seed', '7', ...extra]);
  for (let i = 0; i < 100 && !/control API on http/.test(p.output); i++) await sleep(20);
  const m = p.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/);
  assert.ok(m, p.output);
  p.api = m[1];
  return p;
}

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--seed', '5']);
  proxy = await startProxy(sim.base, ['--threads', '2']);
  assert.match(proxy.output, /\(2 loop threads\)/);
  api = proxy.api;
});
after(async () => {
  if (proxy) await proxy.stop('SIGKILL');
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function raw(url, init = {}) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(20000) });
  const body = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, body };
}
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
// The simulator's per-request fields: the completion id and the creation time.
const unstamp = (b) => b.toString('utf8').replace(/"id":"[^"]*"/g, '"id":""').replace(/"created":\d+/g, '"created":0');
const apiJson = async (method, p, body) => {
  const res = await fetch(api + p, { method, body: body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body)), signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* empty */ }
  return { status: res.status, json, text };
};

const run = (args, opts) => runBin(['run', ...args], opts);
const readJsonl = (f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

test('passthrough: bytes from a byte server arrive unchanged (sha256)', async () => {
  // 1 MiB of random bytes with Content-Length, and a chunked stream of random
  // SSE-looking pieces written with pauses.
  const blob = crypto.randomBytes(1 << 20);
  const pieces = Array.from({ length: 50 }, (_, i) => Buffer.from(`data: ${crypto.randomBytes(40).toString('base64')} ${i}\n\n`));
  const srv = http.createServer(async (req, res) => {
    let body = [];
    for await (const c of req) body.push(c);
    body = Buffer.concat(body);
    if (req.url.startsWith('/blob')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': blob.length, 'x-custom': 'Keep Me' });
      res.end(blob);
    } else if (req.url.startsWith('/echo')) {
      res.writeHead(201, { 'content-type': 'application/x-echo', 'x-query': req.url, 'x-method': req.method, 'x-in': req.headers['x-in'] || '' });
      res.end(body);
    } else {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const p of pieces) { res.write(p); await sleep(2); }
      res.end();
    }
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  const up = `http://127.0.0.1:${srv.address().port}`;
  const px = await startProxy(up);
  try {
    const a = await raw(px.base + '/blob?x=1');
    assert.equal(a.status, 200);
    assert.equal(a.headers.get('content-length'), String(blob.length));
    assert.equal(a.headers.get('x-custom'), 'Keep Me');
    assert.equal(sha(a.body), sha(blob));
    const s = await raw(px.base + '/stream');
    assert.equal(s.headers.get('content-type'), 'text/event-stream');
    assert.equal(sha(s.body), sha(Buffer.concat(pieces)));
    const payload = crypto.randomBytes(100000);
    const e = await raw(px.base + '/echo/a?b=c&d=%20e', { method: 'PUT', body: payload, headers: { 'x-in': 'v1' } });
    assert.equal(e.status, 201);
    assert.equal(e.headers.get('x-query'), '/echo/a?b=c&d=%20e');
    assert.equal(e.headers.get('x-method'), 'PUT');
    assert.equal(e.headers.get('x-in'), 'v1');
    assert.equal(sha(e.body), sha(payload));
  } finally {
    await px.stop('SIGTERM');
    srv.close();
  }
  assert.equal(px.exited.code, 0, px.stderr);
});

test('passthrough: simulator answers direct and through the proxy are identical but for id/created', async () => {
  const bodies = [
    { model: 'tokenstorm/tiny', stream: true, temperature: 0, max_tokens: 24, messages: [{ role: 'user', content: 'tell me about proxies' }] },
    { model: 'tokenstorm/tiny', stream: false, temperature: 0, max_tokens: 24, messages: [{ role: 'user', content: 'tell me about proxies' }] },
    { model: 'tokenstorm/tiny', stream: true, temperature: 0, max_tokens: 16, prompt: 'once upon a time' },
  ];
  const paths = ['/v1/chat/completions', '/v1/chat/completions', '/v1/completions'];
  for (let i = 0; i < bodies.length; i++) {
    const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(bodies[i]) };
    const d = await raw(sim.base + paths[i], init);
    const p = await raw(proxy.base + paths[i], init);
    assert.equal(p.status, d.status);
    assert.equal(d.status, 200);
    assert.equal(p.headers.get('content-type'), d.headers.get('content-type'));
    // Everything but the simulator's per-request id and created fields is byte-identical.
    assert.equal(sha(unstamp(p.body)), sha(unstamp(d.body)), `${paths[i]} #${i}:\n${p.body}\n---\n${d.body}`);
    assert.ok(p.body.length > 100);
  }
  const m1 = await raw(sim.base + '/v1/models');
  const m2 = await raw(proxy.base + '/v1/models');
  assert.equal(sha(m2.body), sha(m1.body), 'a body without per-request fields is byte-identical');
  // the proxy timed its own delay on each piece it passed through (its /metrics)
  const metrics = await (await fetch(api + '/metrics')).text();
  const buckets = [...metrics.matchAll(/^tokenstorm_proxy_forward_delay_seconds_bucket\{le="([^"]+)"\} (\d+)$/mg)]
    .map((m) => [m[1], Number(m[2])]);
  assert.equal(buckets.at(-1)[0], '+Inf');
  for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i][1] >= buckets[i - 1][1], metrics);
  const count = Number(metrics.match(/^tokenstorm_proxy_forward_delay_seconds_count (\d+)$/m)[1]);
  const sum = Number(metrics.match(/^tokenstorm_proxy_forward_delay_seconds_sum (\S+)$/m)[1]);
  assert.equal(buckets.at(-1)[1], count);
  assert.ok(count >= 20, metrics); // the streamed answers came in many pieces
  assert.ok(sum > 0 && sum / count < 1, `mean forward delay ${sum / count} s`);
});

test('a 429 storm: every request of a run is http_429, and /metrics counts the injections', async () => {
  const add = await apiJson('POST', '/faults', { name: 'storm', type: 'http_abort', status: 429, retry_after: '2s', probability: 1, match: { path: '/v1/chat/completions' } });
  assert.equal(add.status, 201, add.text);
  assert.equal(add.json.name, 'storm');
  try {
    const one = await raw(proxy.base + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"tokenstorm/tiny","messages":[]}' });
    assert.equal(one.status, 429);
    assert.equal(one.headers.get('retry-after'), '2');
    const err = JSON.parse(one.body.toString());
    assert.equal(err.error.code, 'rate_limit_exceeded');
    // other paths pass
    assert.equal((await raw(proxy.base + '/v1/models')).status, 200);

    const out = path.join(tmp, 'storm');
    const r = await run(['--target', proxy.base, '--model', 'tokenstorm/tiny', '--rate', '50', '--requests', '30',
      '--output-len', 'fixed:4', '--save-requests', '--out', out, '-q']);
    const reqs = readJsonl(path.join(out, 'requests.jsonl'));
    assert.equal(reqs.length, 30, r.stderr);
    for (const q of reqs) assert.equal(q.outcome, 'http_429', JSON.stringify(q));
    const metrics = await (await fetch(api + '/metrics')).text();
    assert.match(metrics, /tokenstorm_faults_injected_total\{fault="storm",type="http_abort"\} 31\n/);
    assert.match(metrics, /tokenstorm_faults_matched_total\{fault="storm",type="http_abort"\} 31\n/);
    const got = await apiJson('GET', '/faults/storm');
    assert.equal(got.json.injected, 31);
    // the run's connections were spread over both loop threads; the per-thread counts add up
    const total = Number(metrics.match(/^tokenstorm_proxy_requests_total (\d+)$/m)[1]);
    const per = [...metrics.matchAll(/^tokenstorm_proxy_worker_requests_total\{worker="(\d)"\} (\d+)$/mg)];
    assert.deepEqual(per.map((m) => m[1]), ['0', '1']);
    assert.equal(per.reduce((a, m) => a + Number(m[2]), 0), total);
  } finally {
    assert.equal((await apiJson('DELETE', '/faults/storm')).status, 204);
  }
});

test('the control API: faults added, changed and removed during a run; bad specs get 400', async () => {
  // bad specs
  const bad = [
    [{ name: 'x', type: 'http_abrt' }, "fault 'x': type: unknown type 'http_abrt'; did you mean 'http_abort'?"],
    [{ name: 'x', type: 'http_abort', probability: 2 }, "fault 'x': probability: expected a number in [0, 1], got 2"],
    [{ name: 'x', type: 'sse_truncate' }, "fault 'x': after_tokens: required for sse_truncate (after_tokens or after_events)"],
    [{ name: 'x', type: 'http_abort', delay: '1s' }, "fault 'x': delay: does not apply to type http_abort (its fields: status retry_after text)"],
    ['{"name": ', null],
  ];
  for (const [spec, msg] of bad) {
    const r = await apiJson('POST', '/faults', spec);
    assert.equal(r.status, 400, r.text);
    if (msg) assert.equal(r.json.error, msg);
    else assert.match(r.json.error, /^body: not JSON/);
  }
  assert.equal((await apiJson('GET', '/faults/nope')).status, 404);
  assert.equal((await apiJson('DELETE', '/faults/nope')).status, 404);
  assert.equal((await apiJson('PATCH', '/faults')).status, 405);
  assert.equal((await apiJson('PUT', '/faults/a', { name: 'b', type: 'sse_drop_done' })).status, 400);

  // a run of ~4 s at 25 rps: faults change each second
  const out = path.join(tmp, 'live');
  const running = run(['--target', proxy.base, '--model', 'tokenstorm/tiny', '--rate', '25', '--duration', '4s',
    '--output-len', 'fixed:4', '--save-requests', '--out', out, '-q']);
  await sleep(1000);
  let r = await apiJson('POST', '/faults', { name: 'live', type: 'http_abort', status: 503 });
  assert.equal(r.status, 201, r.text);
  r = await apiJson('POST', '/faults', { name: 'live', type: 'http_abort', status: 503 });
  assert.equal(r.status, 409);
  await sleep(1000);
  r = await apiJson('PUT', '/faults/live', { type: 'http_abort', status: 429 });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.status, 429);
  assert.ok(r.json.injected > 0, 'counters survive a change');
  const list = await apiJson('GET', '/faults');
  assert.deepEqual(list.json.faults.map((f) => f.name), ['live']);
  await sleep(1000);
  assert.equal((await apiJson('DELETE', '/faults/live')).status, 204);
  const res = await running;
  const reqs = readJsonl(path.join(out, 'requests.jsonl'));
  const counts = {};
  for (const q of reqs) counts[q.outcome] = (counts[q.outcome] || 0) + 1;
  assert.ok(counts.ok >= 20, JSON.stringify(counts) + res.stderr);
  assert.ok(counts.http_5xx >= 10, JSON.stringify(counts));
  assert.ok(counts.http_429 >= 10, JSON.stringify(counts));
  assert.equal(counts.ok + counts.http_5xx + counts.http_429, reqs.length, JSON.stringify(counts));
  // in order: ok..., 503s, 429s, ok...
  const seq = reqs.sort((a, b) => a.id - b.id).map((q) => q.outcome);
  const first5 = seq.indexOf('http_5xx');
  const last429 = seq.lastIndexOf('http_429');
  assert.ok(seq.slice(0, first5).every((o) => o === 'ok'));
  assert.ok(seq.slice(last429 + 1).every((o) => o === 'ok'));
  assert.equal((await apiJson('POST', '/reset')).status, 204);
});

test('header-triggered faults and a faults file', async () => {
  const yaml = path.join(tmp, 'faults.yaml');
  fs.writeFileSync(yaml, 'faults:\n  - name: slow\n    type: http_delay_request\n    delay: 300ms\n    probability: 0\n');
  // --threads auto: one loop per core; SIGTERM below must still end it with 0
  const px = await startProxy(sim.base, ['--faults', yaml, '--threads', 'auto']);
  try {
    let t = Date.now();
    assert.equal((await raw(px.base + '/v1/models')).status, 200);
    assert.ok(Date.now() - t < 250, 'probability 0: not delayed');
    t = Date.now();
    assert.equal((await raw(px.base + '/v1/models', { headers: { 'x-tokenstorm-fault': 'slow' } })).status, 200);
    assert.ok(Date.now() - t >= 300, 'asked for by name: delayed');
    const a = await raw(px.base + '/v1/models', { headers: { 'x-tokenstorm-fault-abort': '503' } });
    assert.equal(a.status, 503);
    const b = await raw(px.base + '/v1/models', { headers: { 'x-tokenstorm-fault-abort': '200' } });
    assert.equal(b.status, 400);
    assert.match(b.body.toString(), /x-tokenstorm-fault-abort: status: expected an HTTP error status 400..599, got 200/);
    t = Date.now();
    assert.equal((await raw(px.base + '/v1/models', { headers: { 'x-tokenstorm-fault-delay': '200ms' } })).status, 200);
    assert.ok(Date.now() - t >= 200);
  } finally {
    await px.stop('SIGTERM');
  }
  assert.equal(px.exited.code, 0);
  // a bad file is refused with the entry's message
  fs.writeFileSync(yaml, 'faults:\n  - {name: a, type: http_abort, status: 700}\n');
  const bad = spawn(BIN, ['proxy', '--upstream', sim.base, '--faults', yaml, '--listen', '127.0.0.1:0', '--no-api']);
  let err = '';
  bad.stderr.on('data', (d) => { err += d; });
  const code = await new Promise((r) => bad.on('exit', r));
  assert.equal(code, 2);
  assert.match(err, /faults\[0\]: fault 'a': status: expected an HTTP error status 400..599, got 700/);
  for (const t of ['0', '65', 'many']) {
    const p = spawn(BIN, ['proxy', '--upstream', sim.base, '--threads', t, '--listen', '127.0.0.1:0', '--no-api']);
    let e = '';
    p.stderr.on('data', (d) => { e += d; });
    assert.equal(await new Promise((r) => p.on('exit', r)), 2);
    assert.match(e, new RegExp(`--threads: expected 1\\.\\.64 or auto, got '${t}'`));
  }
});
