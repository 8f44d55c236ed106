// The official `openai` npm client through `tokenstorm proxy` under faults:
// each fault shows as an error or as a complete answer (docs/CHAOS.md,
// "What the openai client sees"), and no call hangs: every call is bounded
// by an AbortSignal and a test-level timeout.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startSim, startServer, sleep } from '../integration/lib.mjs';

let sim;
let proxy;
let api;
let client;
const model = 'tokenstorm/tiny';

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise']);
  proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0']);
  for (let i = 0; i < 100 && !/control API on http/.test(proxy.output); i++) await sleep(20);
  api = proxy.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
  client = new OpenAI({ baseURL: proxy.base + '/v1', apiKey: 'sk-test-not-a-secret', timeout: 5000, maxRetries: 0 });
});
after(async () => {
  if (proxy) await proxy.stop('SIGKILL');
  if (sim) await sim.stop('SIGKILL');
});
afterEach(async () => { await fetch(api + '/reset', { method: 'POST', signal: AbortSignal.timeout(5000) }); });

async function addFault(spec) {
  const res = await fetch(api + '/faults', { method: 'POST', body: JSON.stringify(spec), signal: AbortSignal.timeout(5000) });
  assert.equal(res.status, 201, await res.text());
}

// Streams one answer; resolves with {text, chunks, finish, error, ms}.
async function stream(opts = {}, abortMs = 3000) {
  const t0 = Date.now();
  const out = { text: '', chunks: 0, finish: null, error: null };
  try {
    const s = await client.chat.completions.create({
      model, stream: true, max_tokens: 20, ignore_eos: true,
      messages: [{ role: 'user', content: 'Say something.' }],
    }, { signal: AbortSignal.timeout(abortMs), ...opts });
    for await (const chunk of s) {
      for (const c of chunk.choices) {
        if (c.delta?.content) { out.text += c.delta.content; out.chunks++; }
        if (c.finish_reason) out.finish = c.finish_reason;
      }
    }
  } catch (e) {
    out.error = e;
  }
  out.ms = Date.now() - t0;
  return out;
}

test('no fault: a complete answer', { timeout: 10000 }, async () => {
  const r = await stream();
  assert.equal(r.error, null);
  assert.equal(r.chunks, 20);
  assert.equal(r.finish, 'length');
});

test('truncation that closes the connection: an error, not a short answer', { timeout: 10000 }, async () => {
  await addFault({ name: 'cut', type: 'sse_truncate', after_tokens: 5, cut: 'close' });
  const r = await stream();
  assert.ok(r.error, `no error: ${r.chunks} chunks`);
  assert.equal(r.chunks, 5);
  assert.equal(r.finish, null);
});

test('truncation with a clean end: the stream just ends, with no finish_reason', { timeout: 10000 }, async () => {
  await addFault({ name: 'cutend', type: 'sse_truncate', after_tokens: 5, cut: 'end' });
  const r = await stream();
  assert.equal(r.error, null);
  assert.equal(r.chunks, 5);
  assert.equal(r.finish, null); // only the missing finish_reason tells
});

test('429 with Retry-After: RateLimitError (status 429), retried after Retry-After when allowed', { timeout: 15000 }, async () => {
  await addFault({ name: 'storm', type: 'http_abort', status: 429, retry_after: '1s' });
  let r = await stream();
  assert.ok(r.error instanceof OpenAI.RateLimitError, String(r.error));
  assert.equal(r.error.status, 429);
  assert.equal(r.error.headers?.get?.('retry-after') ?? r.error.headers?.['retry-after'], '1');
  // with one retry the client waits the Retry-After second, then fails again
  r = await stream({ maxRetries: 1 }, 8000);
  assert.ok(r.error instanceof OpenAI.RateLimitError, String(r.error));
  assert.ok(r.ms >= 900, `${r.ms} ms`);
});

test('an error event mid-stream: an APIError after the first tokens', { timeout: 10000 }, async () => {
  await addFault({ name: 'boom', type: 'sse_error_event', after_events: 3 });
  const r = await stream();
  assert.ok(r.error instanceof OpenAI.APIError, String(r.error));
  assert.ok(r.chunks >= 1 && r.chunks < 20, `${r.chunks}`);
});

test('an error event with a text: an APIError carrying the text as its message, not a SyntaxError', { timeout: 10000 }, async () => {
  await addFault({ name: 'boom', type: 'sse_error_event', after_events: 3, text: 'model overloaded, try later' });
  const r = await stream();
  assert.ok(r.error instanceof OpenAI.APIError, String(r.error));
  assert.ok(!(r.error instanceof SyntaxError));
  assert.equal(r.error.message, 'model overloaded, try later');
  assert.equal(r.error.error?.message, 'model overloaded, try later');
  // raw: true sends the text itself, which the client cannot parse
  await fetch(api + '/reset', { method: 'POST', signal: AbortSignal.timeout(5000) });
  await addFault({ name: 'raw', type: 'sse_error_event', after_events: 3, text: 'upstream exploded', raw: true });
  const raw = await stream();
  assert.ok(raw.error && !(raw.error instanceof OpenAI.APIError), String(raw.error));
});

test('no [DONE]: nothing the client can see (finish_reason is there, no error)', { timeout: 10000 }, async () => {
  await addFault({ name: 'nodone', type: 'sse_drop_done' });
  const r = await stream();
  assert.equal(r.error, null);
  assert.equal(r.chunks, 20);
  assert.equal(r.finish, 'length');
});

test('a stall mid-stream: the caller\'s AbortSignal ends it quietly (a short answer, no hang)', { timeout: 10000 }, async () => {
  await addFault({ name: 'stall', type: 'sse_stall', after_events: 3, delay: '30s' });
  const signal = AbortSignal.timeout(1500);
  const r = await stream({ signal }, 1500);
  // openai's stream iterator swallows an abort that happens mid-body: the
  // loop just ends; only signal.aborted and the missing finish_reason tell
  assert.equal(r.error, null);
  assert.ok(signal.aborted);
  assert.ok(r.ms >= 1400 && r.ms < 5000, `${r.ms} ms`);
  assert.ok(r.chunks >= 1 && r.chunks < 20, `${r.chunks}`);
  assert.equal(r.finish, null);
});
