// The official `openai` npm client's Realtime WebSocket client (OpenAIRealtimeWS
// on `ws`) through `tokenstorm proxy` in front of the simulator, under each
// WebSocket frame fault, on the server's messages and on the SDK's own
// (direction upstream): what the SDK's events and its socket show. The
// findings are written up in docs/CHAOS.md ("WebSocket frame faults").
//
// As in realtime.test.mjs, `ws` gets a plain socket to the proxy through its
// documented createConnection option (the SDK always builds a wss:// URL).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { startSim, startServer, sleep } from '../integration/lib.mjs';

let sim;
let proxy;
let api;
let client;
let model;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise']);
  proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0']);
  for (let i = 0; i < 100 && !/control API on http/.test(proxy.output); i++) await sleep(20);
  api = proxy.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
  client = new OpenAI({ baseURL: proxy.base + '/v1', apiKey: 'sk-test-not-a-secret', maxRetries: 0 });
  model = (await client.models.list()).data[0].id;
});

after(async () => {
  if (proxy) await proxy.stop('SIGKILL');
  if (sim) await sim.stop('SIGKILL');
});

async function fault(method, path, body) {
  const res = await fetch(api + path, { method, body: body && JSON.stringify(body),
    headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(5000) });
  return res.status;
}

// One session through the proxy under spec: asks for 8 tokens and resolves,
// once response.done came or waitMs passed, with what the SDK emitted, the
// socket's close (code, reason) if it closed, and the errors the SDK raised.
async function session(spec, waitMs = 4000) {
  if (spec) assert.equal(await fault('POST', '/faults', spec), 201);
  try {
    const rt = new OpenAIRealtimeWS({ model, options: {
      createConnection: () => net.connect({ host: '127.0.0.1', port: proxy.port }) } }, client);
    const seen = { events: [], errors: [], close: null, done: null };
    rt.on('event', (e) => seen.events.push(e));
    rt.on('error', (e) => seen.errors.push(e));
    const closed = new Promise((res) => rt.socket.on('close', (code, reason) => {
      seen.close = { code, reason: reason.toString() };
      res();
    }));
    await new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error('no session.created within 10 s')), 10000);
      rt.on('session.created', () => { clearTimeout(t); res(); });
    });
    const done = new Promise((res) => rt.on('response.done', (e) => { seen.done = e; res(); }));
    rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user',
      content: [{ type: 'input_text', text: 'Say something.' }] } });
    rt.send({ type: 'response.create', response: { max_output_tokens: 8, ignore_eos: true } });
    const t0 = Date.now();
    await Promise.race([done, closed, sleep(waitMs)]);
    seen.ms = Date.now() - t0;
    if (!seen.close) {
      rt.close();
      await Promise.race([closed, sleep(2000)]);
    }
    seen.deltas = seen.events.filter((e) => e.type === 'response.output_text.delta');
    seen.text = seen.deltas.map((e) => e.delta).join('');
    seen.finalText = seen.done?.response.output[0]?.content[0]?.text;
    return seen;
  } finally {
    if (spec) await fault('DELETE', `/faults/${spec.name}`);
  }
}

test('no fault: the SDK sees the simulator through the proxy as it is', async () => {
  const s = await session(null);
  assert.equal(s.deltas.length, 8);
  assert.equal(s.text, s.finalText);
  assert.equal(s.done.response.usage.output_tokens, 8);
  assert.equal(s.errors.length, 0);
  assert.equal(s.close.code, 1000); // our own close, answered
});

test('ws_delay: the same events, later', async () => {
  const s = await session({ name: 'd', type: 'ws_delay', delay: '250ms' });
  assert.equal(s.deltas.length, 8);
  assert.equal(s.text, s.finalText);
  assert.ok(s.ms >= 230, `${s.ms} ms`);
});

test('ws_drop: a delta is missing; only response.done\'s text shows it', async () => {
  const s = await session({ name: 'dr', type: 'ws_drop', after_events: 2 });
  assert.equal(s.deltas.length, 7);
  assert.notEqual(s.text, s.finalText);
  assert.equal(s.done.response.usage.output_tokens, 8);
  assert.equal(s.errors.length, 0);
});

test('ws_duplicate: every delta twice, no error from the SDK', async () => {
  const s = await session({ name: 'du', type: 'ws_duplicate' });
  assert.equal(s.deltas.length, 16);
  assert.notEqual(s.text, s.finalText);
  assert.equal(s.errors.length, 0);
});

test('ws_truncate: deltas stop, response.done never comes, the socket stays open', async () => {
  const s = await session({ name: 't', type: 'ws_truncate', after_events: 3 }, 1500);
  assert.equal(s.deltas.length, 3);
  assert.equal(s.done, null);
  assert.equal(s.errors.length, 0);
  assert.equal(s.close.code, 1000); // only when we closed it ourselves
});

test('ws_close: no SDK event or error; the socket closes with the code and reason', async () => {
  const s = await session({ name: 'c', type: 'ws_close', after_events: 3, code: 4001, text: 'chaos' });
  assert.equal(s.deltas.length, 3);
  assert.equal(s.done, null);
  assert.equal(s.errors.length, 0);
  assert.deepEqual(s.close, { code: 4001, reason: 'chaos' });
});

test('ws_stall: everything arrives, after one long gap', async () => {
  const s = await session({ name: 's', type: 'ws_stall', after_events: 2, delay: '800ms' });
  assert.equal(s.deltas.length, 8);
  assert.equal(s.text, s.finalText);
  assert.ok(s.ms >= 750, `${s.ms} ms`);
});

// Direction upstream: the SDK's own messages on their way to the server.
test('upstream ws_delay: the SDK\'s messages reach the server later, the answer is whole', async () => {
  const s = await session({ name: 'ud', type: 'ws_delay', delay: '250ms', direction: 'upstream' });
  assert.equal(s.deltas.length, 8);
  assert.equal(s.text, s.finalText);
  assert.equal(s.errors.length, 0);
  assert.ok(s.ms >= 230, `${s.ms} ms`);
});

test('upstream ws_close: the server gets the close; its answer closes the SDK\'s socket', async () => {
  const s = await session({ name: 'uc', type: 'ws_close', event: 'response.create', code: 4002,
    text: 'chaos up', direction: 'upstream' }, 3000);
  assert.equal(s.deltas.length, 0);
  assert.equal(s.done, null);
  assert.equal(s.close.code, 4002); // the simulator's answer, passed on
});

test('a client that closes while its messages are held: they reach the server first', async () => {
  const metric = async (url, re) => Number(((await (await fetch(url)).text()).match(re) || [0, 0])[1]);
  const upRe = /^tokenstorm_proxy_websocket_messages_total\{direction="upstream"\} (\d+)/m;
  const simEnded = async () => (await metric(sim.base + '/metrics', /^tokenstorm_sim_cancelled_total\{[^}]*\} (\d+)/m)) +
    (await metric(sim.base + '/metrics', /^vllm:request_success_total\{[^}]*finished_reason="length"[^}]*\} (\d+)/m));
  const up0 = await metric(api + '/metrics', upRe);
  const ended0 = await simEnded();
  assert.equal(await fault('POST', '/faults', { name: 'uh', type: 'ws_delay', delay: '300ms', direction: 'upstream' }), 201);
  try {
    const { default: WebSocket } = await import('ws');
    const ws = new WebSocket(`ws://127.0.0.1:${proxy.port}/v1/realtime?model=${encodeURIComponent(model)}`);
    const closed = new Promise((res) => ws.on('close', (code) => res(code)));
    await new Promise((res) => ws.on('open', res));
    ws.send(JSON.stringify({ type: 'response.create', response: { max_output_tokens: 4, ignore_eos: true, instructions: 'Hi.' } }));
    ws.close(1000);
    assert.equal(await closed, 1000);
    let up = up0, ended = ended0;
    for (let i = 0; i < 60 && (up === up0 || ended === ended0); i++) {
      await sleep(50);
      up = await metric(api + '/metrics', upRe);
      ended = await simEnded();
    }
    assert.equal(up, up0 + 1); // response.create went upstream, then the close
    assert.ok(ended > ended0, 'the simulator ran (or cancelled) the response');
  } finally {
    await fault('DELETE', '/faults/uh');
  }
});

test('proxy SIGTERM while a closed client\'s messages are held: not held for the grace', async () => {
  const { default: WebSocket } = await import('ws');
  const p = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0', '--grace', '8s']);
  try {
    for (let i = 0; i < 100 && !/control API on http/.test(p.output); i++) await sleep(20);
    const papi = p.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
    const res = await fetch(papi + '/faults', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'st', type: 'ws_stall', delay: '30s', direction: 'upstream' }) });
    assert.equal(res.status, 201);
    const ws = new WebSocket(`ws://127.0.0.1:${p.port}/v1/realtime?model=${encodeURIComponent(model)}`);
    const closed = new Promise((r) => ws.on('close', (code) => r(code)));
    await new Promise((r) => ws.on('open', r));
    ws.send(JSON.stringify({ type: 'response.create', response: { max_output_tokens: 4, ignore_eos: true, instructions: 'Hi.' } }));
    ws.close(1000);
    assert.equal(await closed, 1000); // the client's side is over; its message waits upstream
    const t0 = Date.now();
    p.proc.kill('SIGTERM');
    const exit = await p.waitExit();
    assert.equal(exit.code, 0);
    assert.ok(Date.now() - t0 < 6000, `${Date.now() - t0} ms: held for the grace`);
  } finally {
    await p.stop('SIGKILL');
  }
});

test('binary and text messages pass both ways as they came (a `ws` echo server upstream)', async () => {
  const { default: WebSocket, WebSocketServer } = await import('ws');
  const echo = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => echo.on('listening', r));
  echo.on('connection', (s) => s.on('message', (data, isBinary) => s.send(data, { binary: isBinary })));
  const p = await startServer(['proxy', '--upstream', `http://127.0.0.1:${echo.address().port}`,
    '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0']);
  // sends msgs on one connection through the proxy; resolves with the first n answers
  const exchange = (msgs, n) => new Promise((res, rej) => {
    const ws = new WebSocket(`ws://127.0.0.1:${p.port}/echo`);
    const got = [];
    const t = setTimeout(() => { ws.terminate(); rej(new Error(`${got.length} of ${n} answers`)); }, 5000);
    ws.on('open', () => { for (const m of msgs) ws.send(m); });
    ws.on('message', (data, isBinary) => {
      got.push({ data: Buffer.from(data), isBinary });
      if (got.length === n) { clearTimeout(t); ws.close(1000); res(got); }
    });
    ws.on('error', rej);
  });
  try {
    for (let i = 0; i < 100 && !/control API on http/.test(p.output); i++) await sleep(20);
    const papi = p.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
    const bin = Buffer.from([0xff, 0x00, 0x80, 0x62]); // not UTF-8: a text frame would be refused
    let got = await exchange([bin, 'héllo'], 2);
    assert.deepEqual(got[0], { data: bin, isBinary: true });
    assert.deepEqual(got[1], { data: Buffer.from('héllo'), isBinary: false });
    // an upstream fault acts on binary messages too (no event type: "any message")
    const res = await fetch(papi + '/faults', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'dup', type: 'ws_duplicate', direction: 'upstream' }) });
    assert.equal(res.status, 201);
    got = await exchange([bin], 2);
    assert.deepEqual(got, [{ data: bin, isBinary: true }, { data: bin, isBinary: true }]);
  } finally {
    await p.stop('SIGKILL');
    echo.close();
  }
});

test('tcp_blackhole does not touch a WebSocket session: matched, not injected', async () => {
  const { default: WebSocket } = await import('ws');
  assert.equal(await fault('POST', '/faults', { name: 'bh', type: 'tcp_blackhole' }), 201);
  try {
    const ws = new WebSocket(`ws://127.0.0.1:${proxy.port}/v1/realtime?model=${encodeURIComponent(model)}`);
    const first = new Promise((r) => ws.once('message', (m) => r(JSON.parse(m.toString()).type)));
    await new Promise((r) => ws.on('open', r));
    assert.equal(await first, 'session.created');
    ws.close(1000);
    const f = await (await fetch(api + '/faults/bh')).json();
    assert.ok(f.matched >= 1, JSON.stringify(f));
    assert.equal(f.injected, 0);
  } finally {
    await fault('DELETE', '/faults/bh');
  }
});

test('a client cut by the proxy (its output over the queue limit) lets the upstream go', async () => {
  const { default: WebSocket, WebSocketServer } = await import('ws');
  const echo = new WebSocketServer({ host: '127.0.0.1', port: 0, maxPayload: 8 << 20 });
  await new Promise((r) => echo.on('listening', r));
  let upstreamClosed = false;
  echo.on('connection', (s) => {
    s.on('message', (data, isBinary) => s.send(data, { binary: isBinary }));
    s.on('close', () => { upstreamClosed = true; });
  });
  const p = await startServer(['proxy', '--upstream', `http://127.0.0.1:${echo.address().port}`,
    '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0']);
  try {
    for (let i = 0; i < 100 && !/control API on http/.test(p.output); i++) await sleep(20);
    const papi = p.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
    const res = await fetch(papi + '/faults', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bw', type: 'tcp_bandwidth', rate: '1K' }) });
    assert.equal(res.status, 201);
    const ws = new WebSocket(`ws://127.0.0.1:${p.port}/echo`, { maxPayload: 8 << 20 });
    const closed = new Promise((r) => ws.on('close', (code) => r(code)));
    ws.on('error', () => {});
    await new Promise((r) => ws.on('open', r));
    const big = Buffer.alloc(3 << 20, 7);
    for (let i = 0; i < 8; i++) ws.send(big); // 24 MiB back through a 1 KB/s link: over the 16 MiB queue
    assert.equal(await closed, 1006);
    let inflight = -1;
    for (let i = 0; i < 60 && (inflight !== 0 || !upstreamClosed); i++) {
      await sleep(50);
      const m = await (await fetch(papi + '/metrics')).text();
      inflight = Number(m.match(/^tokenstorm_proxy_requests_in_flight (\d+)/m)[1]);
    }
    assert.equal(inflight, 0);
    assert.ok(upstreamClosed, 'the upstream connection was let go');
  } finally {
    await p.stop('SIGKILL');
    echo.close();
  }
});

test('a client that vanishes mid-response: the proxy lets the upstream go', async () => {
  const { default: WebSocket } = await import('ws');
  const ws = new WebSocket(`ws://127.0.0.1:${proxy.port}/v1/realtime?model=${encodeURIComponent(model)}`);
  let n = 0;
  await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`only ${n} messages`)), 10000);
    ws.on('open', () => ws.send(JSON.stringify({ type: 'response.create', response: { max_output_tokens: 4000, ignore_eos: true, instructions: 'Talk.' } })));
    ws.on('message', () => { if (++n === 20) { clearTimeout(t); ws._socket.destroy(); res(); } });
  });
  let inflight = -1;
  for (let i = 0; i < 50 && inflight !== 0; i++) {
    await sleep(50);
    const m = await (await fetch(api + '/metrics')).text();
    inflight = Number(m.match(/^tokenstorm_proxy_requests_in_flight (\d+)/m)[1]);
  }
  assert.equal(inflight, 0);
});

test('proxy SIGTERM: open WebSocket sessions are closed with 1001 at once', async () => {
  const { default: WebSocket } = await import('ws');
  const p = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', '--no-api', '--grace', '8s']);
  try {
    const ws = new WebSocket(`ws://127.0.0.1:${p.port}/v1/realtime?model=${encodeURIComponent(model)}`);
    const closed = new Promise((res) => ws.on('close', (code, reason) => res({ code, reason: reason.toString() })));
    await new Promise((res) => ws.on('open', res));
    ws.send(JSON.stringify({ type: 'response.create', response: { max_output_tokens: 4000, ignore_eos: true, instructions: 'Talk.' } }));
    await new Promise((res) => ws.once('message', res));
    const t0 = Date.now();
    p.proc.kill('SIGTERM');
    assert.deepEqual(await closed, { code: 1001, reason: 'proxy shutting down' });
    const exit = await p.waitExit();
    assert.equal(exit.code, 0);
    assert.ok(Date.now() - t0 < 6000, `${Date.now() - t0} ms: not held for the 8 s grace`);
  } finally {
    await p.stop('SIGKILL');
  }
});
