// The official `openai` npm client's Realtime WebSocket client (OpenAIRealtimeWS,
// on the `ws` package) against the simulator's /v1/realtime.
//
// The SDK always builds a wss:// URL (buildRealtimeURL sets the protocol);
// the simulator speaks plain TCP, so the tests hand `ws` a plain socket
// through its documented `createConnection` option: everything above the
// socket (the upgrade, frames, masking, events) is the SDK's and ws's own.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { startSim } from '../integration/lib.mjs';

let sim;
let client;
let model;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise']);
  client = new OpenAI({ baseURL: sim.base + '/v1', apiKey: 'sk-test-not-a-secret', maxRetries: 0 });
  model = (await client.models.list()).data[0].id;
});

after(async () => { if (sim) await sim.stop('SIGKILL'); });

function plain() {
  return (opts) => net.connect({ host: '127.0.0.1', port: sim.port });
}

// Opens a session; resolves with { rt, events } once session.created came.
function open(extra = {}) {
  const rt = new OpenAIRealtimeWS({ model, options: { createConnection: plain(), ...extra } }, client);
  const events = [];
  rt.on('event', (e) => events.push(e));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('no session.created within 10 s')), 10000);
    rt.on('error', (err) => { if (!events.length) { clearTimeout(t); reject(err); } });
    rt.on('session.created', () => { clearTimeout(t); resolve({ rt, events }); });
  });
}

function waitFor(rt, type, timeoutMs = 15000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no ${type} within ${timeoutMs} ms`)), timeoutMs);
    rt.on(type, (e) => { clearTimeout(t); resolve(e); });
  });
}

function ask(rt, text, response = {}) {
  rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
  rt.send({ type: 'response.create', response });
}

test('a text response streams deltas and ends with usage in response.done', async () => {
  const { rt, events } = await open();
  const done = waitFor(rt, 'response.done');
  ask(rt, 'Say something.', { max_output_tokens: 12, ignore_eos: true });
  const d = await done;
  const deltas = events.filter((e) => e.type === 'response.output_text.delta');
  assert.equal(deltas.length, 12);
  assert.equal(d.response.status, 'incomplete');
  assert.equal(d.response.status_details.reason, 'max_output_tokens');
  assert.equal(d.response.usage.output_tokens, 12);
  assert.ok(d.response.usage.input_tokens > 0);
  assert.equal(d.response.usage.total_tokens, d.response.usage.input_tokens + 12);
  const text = deltas.map((e) => e.delta).join('');
  assert.equal(d.response.output[0].content[0].text, text);
  const order = events.map((e) => e.type);
  assert.ok(order.indexOf('response.created') < order.indexOf('response.output_text.delta'));
  assert.ok(order.indexOf('response.output_text.done') < order.indexOf('response.done'));
  rt.close();
});

test('several responses on one connection: the second sees the first in its prompt', async () => {
  const { rt } = await open();
  let d = waitFor(rt, 'response.done');
  ask(rt, 'First question here.', { max_output_tokens: 5, ignore_eos: true });
  const first = await d;
  d = waitFor(rt, 'response.done');
  rt.removeAllListeners?.('response.done');
  const second = new Promise((resolve) => rt.on('response.done', resolve));
  ask(rt, 'Second question.', { max_output_tokens: 5, ignore_eos: true });
  const s = await second;
  assert.notEqual(s.response.id, first.response.id);
  assert.ok(s.response.usage.input_tokens > first.response.usage.input_tokens + 5,
    `${s.response.usage.input_tokens} vs ${first.response.usage.input_tokens}`);
  rt.close();
});

test('out-of-band responses (conversation none) do not grow the conversation', async () => {
  const { rt } = await open();
  const input = [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hello there.' }] }];
  const dones = [];
  rt.on('response.done', (e) => dones.push(e));
  for (let i = 0; i < 2; i++) {
    const d = waitFor(rt, 'response.done');
    rt.send({ type: 'response.create', response: { conversation: 'none', input, max_output_tokens: 3, ignore_eos: true } });
    await d;
  }
  assert.equal(dones[0].response.usage.input_tokens, dones[1].response.usage.input_tokens);
  assert.equal(dones[0].response.conversation_id, null);
  rt.close();
});

test('response.cancel ends the response as cancelled', async () => {
  const { rt } = await open();
  const first = waitFor(rt, 'response.output_text.delta');
  const done = waitFor(rt, 'response.done');
  ask(rt, 'Long answer please.', { max_output_tokens: 2000, ignore_eos: true });
  await first;
  rt.send({ type: 'response.cancel' });
  const d = await done;
  assert.equal(d.response.status, 'cancelled');
  rt.close();
});

test('errors are error events the SDK raises as OpenAIRealtimeError', async () => {
  const { rt } = await open();
  const err = new Promise((resolve) => rt.on('error', resolve));
  rt.send({ type: 'input_audio_buffer.append', audio: 'AAAA' });
  const e = await err;
  assert.equal(e.error.type, 'invalid_request_error');
  assert.match(e.message, /text only/);
  // a second response.create while one runs is refused
  const err2 = new Promise((resolve) => { rt.removeAllListeners?.('error'); rt.on('error', resolve); });
  ask(rt, 'Go.', { max_output_tokens: 200, ignore_eos: true });
  rt.send({ type: 'response.create' });
  const e2 = await err2;
  assert.equal(e2.error.code, 'conversation_already_has_active_response');
  rt.close();
});

test('the beta event names with OpenAI-Beta: realtime=v1', async () => {
  const { rt, events } = await open({ headers: { 'OpenAI-Beta': 'realtime=v1' } });
  const done = waitFor(rt, 'response.done');
  ask(rt, 'Hi.', { max_output_tokens: 3, ignore_eos: true });
  await done;
  assert.equal(events.filter((e) => e.type === 'response.text.delta').length, 3);
  assert.ok(events.some((e) => e.type === 'conversation.item.created'));
  rt.close();
});

test('with sim --api-key the upgrade needs the bearer token: 401 without, session with it', async () => {
  const keyed = await startSim(['--profile', 'tiny', '--no-noise', '--api-key', 'sk-right']);
  try {
    const WS = (await import('ws')).default;
    const url = `ws://127.0.0.1:${keyed.port}/v1/realtime?model=${encodeURIComponent(model)}`;
    const statusOf = (headers) => new Promise((resolve) => {
      const ws = new WS(url, { headers });
      ws.on('unexpected-response', (req, res) => resolve(res.statusCode));
      ws.on('open', () => { ws.close(); resolve(101); });
      ws.on('error', () => {});
    });
    assert.equal(await statusOf({}), 401);
    assert.equal(await statusOf({ Authorization: 'Bearer sk-wrong' }), 401);
    // the SDK sends the client's key as the bearer token
    const c = new OpenAI({ baseURL: keyed.base + '/v1', apiKey: 'sk-right', maxRetries: 0 });
    const rt = new OpenAIRealtimeWS({ model, options: { createConnection: () => net.connect({ host: '127.0.0.1', port: keyed.port }) } }, c);
    const created = await waitFor(rt, 'session.created');
    assert.equal(created.session.model, model);
    rt.close();
  } finally {
    await keyed.stop('SIGKILL');
  }
});

test('on SIGTERM the simulator ends the response in flight, then closes with 1001', async () => {
  const own = await startSim(['--profile', 'tiny', '--no-noise', '--grace', '5s']);
  try {
    const c = new OpenAI({ baseURL: own.base + '/v1', apiKey: 'sk-test-not-a-secret', maxRetries: 0 });
    const rt = new OpenAIRealtimeWS({ model, options: { createConnection: () => net.connect({ host: '127.0.0.1', port: own.port }) } }, c);
    const events = [];
    rt.on('event', (e) => events.push(e.type));
    await waitFor(rt, 'session.created');
    const idle = new OpenAIRealtimeWS({ model, options: { createConnection: () => net.connect({ host: '127.0.0.1', port: own.port }) } }, c);
    await waitFor(idle, 'session.created');
    const firstDelta = waitFor(rt, 'response.output_text.delta');
    ask(rt, 'Go on.', { max_output_tokens: 300, ignore_eos: true });
    await firstDelta;
    const closed = (s) => new Promise((resolve) => s.socket.on('close', (code) => resolve(code)));
    const [busyClosed, idleClosed] = [closed(rt), closed(idle)];
    own.proc.kill('SIGTERM');
    assert.equal(await idleClosed, 1001);
    assert.equal(await busyClosed, 1001);
    assert.ok(events.includes('response.done'), 'the response in flight finished first');
  } finally {
    await own.stop('SIGKILL');
  }
});
