// Retry amplification measured by `tokenstorm proxy` against the attempts the
// official `openai` npm client really makes (maxRetries 2) under a 429
// storm and 503s: the proxy's factor (GET /chain, /metrics) equals the
// client's attempts per call, per trigger too, and with Retry-After the
// retries come as far apart as the header says. Every call is bounded by
// the client's timeout and a test-level timeout.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startSim, startServer, sleep } from '../integration/lib.mjs';

let sim;
let proxy;
let api;
const model = 'tokenstorm/tiny';

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise']);
  proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0', '--seed', '7']);
  for (let i = 0; i < 100 && !/control API on http/.test(proxy.output); i++) await sleep(20);
  api = proxy.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
});
after(async () => {
  if (proxy) await proxy.stop('SIGKILL');
  if (sim) await sim.stop('SIGKILL');
});
beforeEach(async () => {
  await fetch(api + '/reset', { method: 'POST', signal: AbortSignal.timeout(5000) });
  const r = await fetch(api + '/chain', { method: 'DELETE', signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 204);
});

async function addFault(spec) {
  const res = await fetch(api + '/faults', { method: 'POST', body: JSON.stringify(spec), signal: AbortSignal.timeout(5000) });
  assert.equal(res.status, 201, await res.text());
}

async function chain() {
  const r = await fetch(api + '/chain', { signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 200);
  return (await r.json()).totals;
}

// A client whose every HTTP attempt is logged per call: [{t, status}].
function tracedClient(log) {
  return new OpenAI({
    baseURL: proxy.base + '/v1', apiKey: 'sk-test-not-a-secret', timeout: 10000, maxRetries: 2,
    fetch: async (url, init) => {
      const call = JSON.parse(init.body).messages[0].content;
      const entry = { t: Date.now(), status: 0 };
      (log[call] ??= []).push(entry);
      const res = await fetch(url, init);
      entry.status = res.status;
      return res;
    },
  });
}

async function calls(client, n) {
  return Promise.all(Array.from({ length: n }, (_, i) => client.chat.completions.create({
    model, max_tokens: 5, messages: [{ role: 'user', content: `call ${i}` }],
  }).then(() => null, (e) => e)));
}

test('a 429 storm with Retry-After: factor 3 = the SDK\'s attempts, retries spaced by the header', { timeout: 30000 }, async () => {
  await addFault({ name: 'storm', type: 'http_abort', status: 429, retry_after: '1s' });
  const log = {};
  const errs = await calls(tracedClient(log), 3);
  for (const e of errs) assert.ok(e instanceof OpenAI.RateLimitError, String(e));
  const attempts = Object.values(log).reduce((s, a) => s + a.length, 0);
  assert.equal(attempts, 9); // 1 + maxRetries, each call
  const t = await chain();
  assert.equal(t.attempts, attempts);
  assert.equal(t.distinct, 3);
  assert.equal(t.amplification, attempts / 3);
  assert.equal(t.retries['429'], 6);
  assert.equal(t.early_retries, 0); // the SDK honours Retry-After
  for (const a of Object.values(log)) {
    for (let i = 1; i < a.length; i++) {
      const gap = a[i].t - a[i - 1].t;
      assert.ok(gap >= 990 && gap < 4000, `gap ${gap} ms`);
    }
  }
  const metrics = await (await fetch(api + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
  assert.match(metrics, /tokenstorm_proxy_retry_amplification 3\n/);
  assert.match(metrics, /tokenstorm_proxy_retry_amplification\{trigger="429"\} 3\n/);
  // every gap at least the Retry-After second: none in the buckets below 1 s
  assert.match(metrics, /tokenstorm_proxy_retry_gap_seconds_bucket\{le="0.5"\} 0\n/);
  assert.match(metrics, /tokenstorm_proxy_retry_gap_seconds_count 6\n/);
});

test('429s and 503s at random: the factor and its split by trigger match what the SDK did', { timeout: 30000 }, async () => {
  await addFault({ name: 'storm', type: 'http_abort', status: 429, probability: 0.35, retry_after: '0s' });
  await addFault({ name: 'down', type: 'http_abort', status: 503, probability: 0.35 });
  const log = {};
  const n = 12;
  await calls(tracedClient(log), n);
  let attempts = 0;
  const after = { 429: 0, 503: 0 };
  for (const a of Object.values(log)) {
    attempts += a.length;
    for (let i = 0; i < a.length - 1; i++) after[a[i].status]++;
  }
  assert.ok(attempts > n, `no retries in ${attempts} attempts`);
  const t = await chain();
  assert.equal(t.distinct, n);
  assert.equal(t.attempts, attempts);
  assert.ok(Math.abs(t.amplification - attempts / n) < 1e-9, `${t.amplification} vs ${attempts / n}`);
  assert.equal(t.retries['429'] ?? 0, after[429]);
  assert.equal(t.retries['503'] ?? 0, after[503]);
});

test('no fault: the same prompt sent twice is two requests, not a retry', { timeout: 15000 }, async () => {
  const client = new OpenAI({ baseURL: proxy.base + '/v1', apiKey: 'sk-test-not-a-secret', timeout: 10000, maxRetries: 2 });
  for (let i = 0; i < 2; i++) {
    await client.chat.completions.create({ model, max_tokens: 3, messages: [{ role: 'user', content: 'same' }] });
  }
  const t = await chain();
  assert.equal(t.attempts, 2);
  assert.equal(t.distinct, 2);
  assert.equal(t.amplification, 1);
});
