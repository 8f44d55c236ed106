// `tokenstorm proxy` in front of the simulator's /v1/realtime: the WebSocket
// upgrade is forwarded, messages relayed both ways, and each frame fault
// (ws_delay, ws_drop, ws_duplicate, ws_truncate, ws_close, ws_stall), on the
// server's messages and (direction upstream) on the client's, and the TCP
// faults on the connection's bytes, show in what
// `tokenstorm run --endpoint realtime` reports through the proxy.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { controlApi, runBin, startSim, startServer, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-proxyws-'));
let sim;
let proxy;
let n = 0;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--admin']);
  proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--seed', '7']);
  proxy.api = await controlApi(proxy);
});

after(async () => {
  if (proxy) await proxy.stop('SIGKILL');
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function api(method, p, body) {
  const res = await fetch(proxy.api + p, { method, body: body && JSON.stringify(body),
    headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(10000) });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

// Runs 3 realtime requests of 8 tokens through the proxy under spec (none:
// no fault); returns the exit code, result.json, the request lines and the
// fault as the API shows it afterwards.
async function runUnder(spec, extra = []) {
  if (spec) assert.equal((await api('POST', '/faults', spec)).status, 201);
  const out = path.join(tmp, `r${++n}`);
  const r = await runBin(['run', '--target', proxy.base, '--endpoint', 'realtime', '--requests', '3',
    '--concurrency', '1', '--output-len', 'fixed:8', '--timeout', '3s', '--save-requests',
    '--out', out, '-q', ...extra], { timeoutMs: 60000 });
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  const reqs = fs.readFileSync(path.join(out, 'requests.jsonl'), 'utf8').split('\n').filter(Boolean)
    .map((l) => JSON.parse(l));
  let fault = null;
  if (spec) {
    fault = (await api('GET', `/faults/${spec.name}`)).json;
    assert.equal((await api('DELETE', `/faults/${spec.name}`)).status, 204);
  }
  return { code: r.code, stderr: r.stderr, result, reqs, fault };
}

async function metric(name) {
  const text = await (await fetch(proxy.api + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
  const m = text.match(new RegExp('^' + name.replace(/[{}"]/g, '\\$&') + ' (\\d+)', 'm'));
  assert.ok(m, name);
  return Number(m[1]);
}

// the three requests at once: for the tests that wait out a timeout or a delay
const PAR = ['--concurrency', '3'];

const clean = (s) => { for (const k of ['after_done', 'out_of_order', 'bad_close', 'no_done']) assert.equal(s[k], 0, k); };

test('no fault: realtime passes through the proxy unchanged', async () => {
  const conns = await metric('tokenstorm_proxy_websocket_connections_total');
  const up = await metric('tokenstorm_proxy_websocket_messages_total{direction="upstream"}');
  const { code, stderr, result, reqs } = await runUnder(null);
  assert.equal(await metric('tokenstorm_proxy_websocket_connections_total'), conns + 3);
  assert.ok(await metric('tokenstorm_proxy_websocket_messages_total{direction="upstream"}') >= up + 3);
  assert.equal(code, 0, stderr);
  assert.equal(result.summary.completed, 3);
  assert.equal(result.summary.total_output_tokens, 24);
  clean(result.streams);
  for (const q of reqs) assert.equal(q.content_chunks, 8);
});

test('ws_delay: every message later, nothing else changes', async () => {
  const { code, stderr, result, fault } = await runUnder({ name: 'd', type: 'ws_delay', delay: '300ms' });
  assert.equal(code, 0, stderr);
  assert.equal(result.summary.completed, 3);
  clean(result.streams);
  assert.ok(result.summary.p50_ttft_ms >= 280, `ttft ${result.summary.p50_ttft_ms}`);
  assert.ok(fault.injected >= 3 * 8);
});

test('ws_drop: one delta fewer, usage still says 8', async () => {
  const { code, stderr, result, reqs, fault } = await runUnder({ name: 'dr', type: 'ws_drop', after_events: 2 });
  assert.equal(code, 0, stderr);
  clean(result.streams);
  assert.equal(result.summary.total_output_tokens, 24);
  for (const q of reqs) assert.equal(q.content_chunks, 7);
  assert.equal(fault.injected, 3);
});

test('ws_duplicate: every delta twice', async () => {
  const down = await metric('tokenstorm_proxy_websocket_messages_total{direction="downstream"}');
  const { code, stderr, result, reqs } = await runUnder({ name: 'du', type: 'ws_duplicate' });
  assert.ok(await metric('tokenstorm_proxy_websocket_messages_total{direction="downstream"}') >= down + 3 * 16);
  assert.equal(code, 0, stderr);
  clean(result.streams);
  for (const q of reqs) assert.equal(q.content_chunks, 16);
});

test('ws_duplicate of response.done and ws_drop of response.created: out of order', async () => {
  let r = await runUnder({ name: 'dd', type: 'ws_duplicate', event: 'response.done' });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.result.streams.out_of_order, 3);
  r = await runUnder({ name: 'dc', type: 'ws_drop', event: 'response.created' });
  assert.equal(r.result.streams.out_of_order, 3);
});

test('ws_truncate: no response.done, the run times out', async () => {
  const { code, result, reqs, fault } = await runUnder({ name: 't', type: 'ws_truncate', after_events: 3 },
    ['--timeout', '2s', ...PAR]);
  assert.equal(code, 3);
  assert.equal(result.streams.no_done, 3);
  assert.equal(result.outcomes.timeout_total, 3);
  for (const q of reqs) assert.equal(q.content_chunks, 3);
  assert.ok(fault.injected >= 3);
});

test('ws_truncate under --timeout-idle: the silence ends the request as timeout_idle', async () => {
  const { code, result } = await runUnder({ name: 'ti', type: 'ws_truncate', after_events: 2 },
    ['--timeout', '20s', '--timeout-idle', '1s', ...PAR]);
  assert.equal(code, 3);
  assert.equal(result.outcomes.timeout_idle, 3);
  assert.equal(result.streams.no_done, 3);
  assert.match(result.errors.top[0].message, /idle timeout: nothing for 1000 ms/);
  assert.ok(result.summary.duration < 15, `${result.summary.duration} s`);
});

test('ws_close: the close code reaches the client as a bad close before response.done', async () => {
  const { code, result, reqs } = await runUnder({ name: 'c', type: 'ws_close', after_events: 3, code: 4001, text: 'chaos' });
  assert.equal(code, 3);
  assert.equal(result.streams.bad_close, 3);
  assert.equal(result.streams.no_done, 3);
  assert.match(reqs[0].error, /closed with 4001 before response\.done/);
  for (const q of reqs) assert.equal(q.content_chunks, 3);
});

test('ws_stall: one long gap between deltas', async () => {
  const { code, stderr, result } = await runUnder({ name: 's', type: 'ws_stall', after_events: 2, delay: '700ms' }, PAR);
  assert.equal(code, 0, stderr);
  clean(result.streams);
  assert.ok(result.latency.itl.max >= 650, JSON.stringify(result.latency.itl));
  assert.ok(result.summary.p50_itl_ms < 300);
});

// Direction upstream: the client's messages (the run sends one
// response.create per request) go through the faults on their way to the
// server.
test('upstream ws_delay: each response.create reaches the server later', async () => {
  const up = await metric('tokenstorm_proxy_websocket_messages_total{direction="upstream"}');
  const { code, stderr, result, reqs, fault } = await runUnder({ name: 'ud', type: 'ws_delay',
    delay: '300ms', direction: 'upstream' });
  assert.equal(code, 0, stderr);
  assert.equal(result.summary.completed, 3);
  clean(result.streams);
  for (const q of reqs) assert.equal(q.content_chunks, 8);
  assert.ok(result.summary.p50_ttft_ms >= 280, `ttft ${result.summary.p50_ttft_ms}`);
  assert.equal(fault.direction, 'upstream');
  assert.ok(fault.injected >= 3);
  assert.equal(await metric('tokenstorm_proxy_websocket_messages_total{direction="upstream"}'),
    up + fault.injected);
});

test('upstream ws_drop of response.create: no response, the run times out', async () => {
  const { code, result, fault } = await runUnder({ name: 'udr', type: 'ws_drop',
    event: 'response.create', direction: 'upstream' }, ['--timeout', '1s', ...PAR]);
  assert.equal(code, 3);
  assert.equal(result.outcomes.timeout_total, 3);
  assert.equal(result.summary.total_output_tokens, 0);
  assert.equal(fault.injected, 3);
});

test('upstream ws_duplicate of response.create: the server refuses the second', async () => {
  const { code, result, reqs, fault } = await runUnder({ name: 'udu', type: 'ws_duplicate',
    event: 'response.create', direction: 'upstream' });
  assert.equal(code, 3);
  assert.equal(result.outcomes.stream_error, 3);
  for (const q of reqs) assert.match(q.error, /conversation_already_has_active_response/);
  assert.equal(fault.injected, 3);
});

test('upstream ws_close: the server is closed with the code instead of response.create', async () => {
  const { code, result, reqs, fault } = await runUnder({ name: 'uc', type: 'ws_close', code: 4001,
    text: 'chaos', direction: 'upstream' });
  // the simulator answers the close with its code, which the proxy passes on
  assert.equal(code, 3);
  assert.equal(result.streams.bad_close, 3);
  assert.equal(result.summary.total_output_tokens, 0);
  for (const q of reqs) assert.match(q.error, /closed with 4001 before response\.done/);
  assert.equal(fault.injected, 3);
});

// TCP faults shape a WebSocket connection's bytes to the client, frames included.
test('tcp_latency on a WebSocket connection: the upgrade and every event later', async () => {
  const { code, stderr, result, reqs, fault } = await runUnder({ name: 'tl', type: 'tcp_latency', delay: '300ms' }, PAR);
  assert.equal(code, 0, stderr);
  assert.equal(result.summary.completed, 3);
  clean(result.streams);
  for (const q of reqs) assert.equal(q.content_chunks, 8);
  assert.ok(result.summary.p50_ttft_ms >= 280, `ttft ${result.summary.p50_ttft_ms}`);
  assert.ok(fault.injected >= 3, `${fault.injected}`); // one per connection (and the run's model lookup)
});

test('tcp_reset after some bytes: the connection is cut mid-answer', async () => {
  const { code, result, reqs, fault } = await runUnder({ name: 'tr', type: 'tcp_reset', bytes: 1200 });
  assert.equal(code, 3);
  assert.equal(result.outcomes.truncated, 3);
  assert.equal(result.streams.no_done, 3);
  for (const q of reqs) assert.match(q.error, /connection closed without a close frame/); // the RST, or EOF first
  assert.ok(fault.injected >= 3, `${fault.injected}`);
});

test('upstream tcp_latency on a WebSocket connection: the client\'s frames reach the server later', async () => {
  const { code, stderr, result, fault } = await runUnder({ name: 'tlu', type: 'tcp_latency', delay: '300ms',
    direction: 'upstream' }, PAR);
  assert.equal(code, 0, stderr);
  assert.equal(result.summary.completed, 3);
  clean(result.streams);
  assert.ok(result.summary.p50_ttft_ms >= 280, `ttft ${result.summary.p50_ttft_ms}`);
  assert.ok(fault.injected >= 3, `${fault.injected}`);
});

test('upstream tcp_reset: the server\'s connection is reset, the client\'s cut', async () => {
  const { code, result, reqs, fault } = await runUnder({ name: 'tru', type: 'tcp_reset', bytes: 500,
    direction: 'upstream' });
  assert.equal(code, 3);
  // cut mid-stream, or before the server's first event reached the client
  // (the reset falls while the client's response.create goes up, and
  // session.created may or may not have been relayed by then)
  assert.equal(result.outcomes.truncated + result.outcomes.recv, 3, JSON.stringify(result.outcomes));
  assert.equal(result.streams.no_done, 3);
  for (const q of reqs) assert.match(q.error, /connection closed without a close frame/);
  assert.ok(fault.injected >= 3, `${fault.injected}`);
});

test('fault specs: bad ws_* fields are refused with the field named', async () => {
  let r = await api('POST', '/faults', { name: 'x', type: 'ws_close', code: 1006 });
  assert.equal(r.status, 400);
  assert.match(JSON.stringify(r.json), /code/);
  r = await api('POST', '/faults', { name: 'x', type: 'ws_truncate' });
  assert.equal(r.status, 400);
  assert.match(JSON.stringify(r.json), /after_events/);
  r = await api('POST', '/faults', { name: 'x', type: 'ws_drop', event: 'Bad Type' });
  assert.equal(r.status, 400);
  assert.match(JSON.stringify(r.json), /event/);
});

test('an upgrade the upstream refuses is passed on with its status', async () => {
  const r = await runBin(['run', '--target', proxy.base, '--endpoint', 'realtime', '--api-key', 'x',
    '--model', 'no-such-model', '--requests', '1', '-q', '--out', path.join(tmp, 'refused')]);
  assert.equal(r.code, 3);
  const result = JSON.parse(fs.readFileSync(path.join(tmp, 'refused', 'result.json'), 'utf8'));
  assert.equal(result.http_status['4xx'], 1);
  assert.equal(result.errors.top[0].status, 404);
  assert.match(result.errors.top[0].message, /upgrade refused: The model `no-such-model` does not exist/);
});

test('--record writes each WebSocket session: messages both ways before faults, the close; replays skip it', async () => {
  const dir = path.join(tmp, 'rec');
  const rp = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--record', dir, '--redact', '/response/input/*/content/*/text']);
  const rapi = await controlApi(rp);
  try {
    // a downstream fault: the recording still has every delta (it is taken before faults)
    const spec = { name: 'recdrop', type: 'ws_drop', after_events: 2 };
    const res = await fetch(rapi + '/faults', { method: 'POST', body: JSON.stringify(spec),
      headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(10000) });
    assert.equal(res.status, 201);
    // a browser client's key rides in the subprotocol: never written
    const r = await runBin(['run', '--target', rp.base, '--endpoint', 'realtime', '--requests', '2',
      '--concurrency', '1', '--output-len', 'fixed:4', '--timeout', '5s', '-q',
      '--header', 'Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.sk-rec-secret-42',
      '--out', path.join(tmp, 'recrun')], { timeoutMs: 60000 });
    assert.equal(r.code, 0, r.stderr);
    const f = await (await fetch(rapi + '/faults/recdrop', { signal: AbortSignal.timeout(10000) })).json();
    assert.equal(f.injected, 2); // one delta of each session never reached the client
    // a key in the query (Azure's ?api-key=) is redacted in any exchange's path
    const q = await fetch(rp.base + '/v1/models?api-key=sk-q-secret-7&x=1', { signal: AbortSignal.timeout(10000) });
    assert.equal(q.status, 200);
    await q.text();
  } finally {
    await rp.stop('SIGTERM');
  }
  const text = fs.readdirSync(dir).filter((f) => /^rec-\d+\.jsonl$/.test(f))
    .map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('');
  assert.doesNotMatch(text, /sk-rec-secret-42|sk-q-secret-7/);
  const lines = text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.ok(lines.some((l) => l.path === '/v1/models?api-key=<redacted>&x=1'), text.slice(0, 2000));
  const ws = lines.filter((l) => l.websocket === true);
  assert.equal(ws.length, 2);
  for (const s of ws) {
    assert.equal(s.method, 'GET');
    assert.match(s.path, /^\/v1\/realtime/);
    assert.equal(s.status, 101);
    assert.equal(s.headers['Sec-WebSocket-Protocol'], 'realtime, openai-insecure-api-key.[redacted]');
    assert.equal(s.outcome, 'ok');
    assert.deepEqual([s.close.by, s.close.code], ['client', 1000]);
    const types = s.messages.map((m) => [m[1], JSON.parse(m[2]).type]);
    assert.ok(types.some(([d, t]) => d === 'server' && t === 'session.created'), JSON.stringify(types));
    assert.ok(types.some(([d, t]) => d === 'client' && t === 'response.create'), JSON.stringify(types));
    assert.equal(types.filter(([d, t]) => d === 'server' && t === 'response.output_text.delta').length, 4);
    assert.deepEqual(types.at(-1), ['server', 'response.done']);
    const t = s.messages.map((m) => m[0]);
    assert.deepEqual(t, [...t].sort((a, b) => a - b));
    assert.ok(s.end_ms >= t.at(-1));
    const create = JSON.parse(s.messages.find((m) => m[1] === 'client')[2]);
    assert.equal(create.response.input[0].content[0].text, '[redacted]');
  }
  // the replays have nothing to send or serve from WebSocket sessions, and say so
  const rr = await runBin(['run', '--target', sim.base, '--replay', dir, '-q',
    '--out', path.join(tmp, 'recreplay')], { timeoutMs: 30000 });
  assert.match(rr.stderr, /2 WebSocket sessions in the recording are not replayed/);
});

test('--record-memory-max holds WebSocket sessions too: past it a session keeps its first messages (recorder_full)', async () => {
  const dir = path.join(tmp, 'recmem');
  const rp = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--record', dir, '--record-memory-max', '4K']);
  const rapi = await controlApi(rp);
  let metrics;
  try {
    // with --model no GET /v1/models goes first (it would be a line too); a short prompt
    const r = await runBin(['run', '--target', rp.base, '--endpoint', 'realtime', '--requests', '1',
      '--model', 'tokenstorm/tiny', '--input-len', 'fixed:16', '--output-len', 'fixed:100',
      '--timeout', '10s', '-q', '--out', path.join(tmp, 'recmemrun')],
    { timeoutMs: 60000 });
    assert.equal(r.code, 0, r.stderr); // the client got its whole answer
    for (let i = 0; i < 50 && !/^tokenstorm_proxy_recorded_total 1$/m.test(metrics || ''); i++) {
      if (i) await sleep(20);
      metrics = await (await fetch(rapi + '/metrics', { signal: AbortSignal.timeout(10000) })).text();
    }
  } finally {
    await rp.stop('SIGTERM');
  }
  assert.match(metrics, /^tokenstorm_proxy_record_cut_total\{reason="memory"\} 1$/m);
  assert.match(metrics, /^tokenstorm_proxy_record_memory_bytes 0$/m);
  const text = fs.readdirSync(dir).filter((f) => /^rec-\d+\.jsonl$/.test(f))
    .map((f) => fs.readFileSync(path.join(dir, f), 'utf8')).join('');
  const [s] = text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.equal(s.websocket, true);
  assert.equal(s.outcome, 'recorder_full');
  const types = s.messages.map((m) => JSON.parse(m[2]).type);
  const server = s.messages.filter((m) => m[1] === 'server').map((m) => JSON.parse(m[2]).type);
  assert.equal(server[0], 'session.created'); // the first ones, in order
  assert.ok(s.messages.length > 1 && s.messages.length < 100, `${s.messages.length} messages`);
  assert.ok(!types.includes('response.done'), types.join(' '));
  const bytes = s.messages.reduce((n, m) => n + m[2].length + 64, 0);
  assert.ok(bytes <= 4096, `${bytes} bytes kept`);
  assert.ok(s.close); // the close is still written
});
