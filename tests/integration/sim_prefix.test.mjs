// Automatic prefix caching in the simulator (docs/SIMULATOR.md, "Prefix
// caching"), through the real binary: the same long prompt twice -> the
// second reports cached_tokens and its first token comes far sooner; shared
// system prompts; vLLM's prefix cache counters at /metrics; cached_tokens in
// the trace log; with prefix_caching off (tiny's default) nothing changes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSim, postJson, sseData, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-simpfx-'));
const trace = path.join(tmp, 'trace.jsonl');
// A slow prefill (0.1 ms per prompt token, the tiny preset otherwise), so a
// cold 3000+ token prompt takes over 300 ms and a cached one about 2 ms.
const B_MS = 0.1;
let sim; // prefix caching on
let off; // the tiny preset as it is: prefix caching off
let model;
const sent = { queried: 0, hit: 0 }; // what the requests below add to /metrics

before(async () => {
  [sim, off] = await Promise.all([
    startSim(['--profile', 'tiny', '--no-noise', '--set', 'prefix_caching=true',
      '--set', `b_ms_per_token=${B_MS}`, '--trace-log', trace]),
    startSim(['--profile', 'tiny', '--no-noise']),
  ]);
  model = (await (await fetch(sim.base + '/v1/models')).json()).data[0].id;
});

after(async () => {
  await Promise.all([sim?.stop('SIGKILL'), off?.stop('SIGKILL')]);
  fs.rmSync(tmp, { recursive: true, force: true });
});

// A long document of distinct words: about 6 tokens per group.
function doc(tag, groups = 600) {
  return Array.from({ length: groups }, (_, i) => `alpha beta gamma ${tag} w${i}`).join(' ');
}

// Streams a chat completion; resolves with the client-side TTFT (ms to the
// first event) and the parsed events.
async function streamChat(base, body, headers = {}) {
  const t0 = performance.now();
  const res = await fetch(base + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    signal: AbortSignal.timeout(20000),
  });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  let ttft = null;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
    if (ttft === null && text.includes('data: {')) ttft = performance.now() - t0;
  }
  const events = sseData(text);
  assert.equal(events.at(-1), '[DONE]');
  return { ttft, events: events.slice(0, -1).map((e) => JSON.parse(e)) };
}

async function traceRecord(id) {
  for (let i = 0; i < 50; i++) {
    const lines = fs.existsSync(trace) ? fs.readFileSync(trace, 'utf8').split('\n').filter(Boolean) : [];
    const rec = lines.map((l) => JSON.parse(l)).find((r) => r.request_id === id);
    if (rec) return rec;
    await sleep(100);
  }
  assert.fail(`no trace record for ${id}`);
}

function count(usage) {
  sent.queried += usage.prompt_tokens;
  sent.hit += usage.prompt_tokens_details.cached_tokens;
}

test('the same long prompt twice: the second is cached and its first token comes far sooner', async () => {
  const body = {
    model, max_tokens: 2, ignore_eos: true,
    messages: [{ role: 'system', content: doc('first') }, { role: 'user', content: 'Summarise the document.' }],
  };
  const a = await streamChat(sim.base, body, { 'x-request-id': 'pfx-1' });
  const b = await streamChat(sim.base, body, { 'x-request-id': 'pfx-2' });
  const ua = a.events.at(-1).usage;
  const ub = b.events.at(-1).usage;
  const P = ua.prompt_tokens;
  assert.ok(P > 3000, `prompt of ${P} tokens`);
  assert.equal(ub.prompt_tokens, P);
  assert.deepEqual(ua.prompt_tokens_details, { cached_tokens: 0 });
  // whole blocks of 16, at most P - 1 tokens: the last one is always computed
  const cached = Math.floor((P - 1) / 16) * 16;
  assert.deepEqual(ub.prompt_tokens_details, { cached_tokens: cached });
  assert.equal(ub.total_tokens, P + 2);
  count(ua);
  count(ub);

  // the model's TTFT of the cold prompt: t_fix + max(t_w, b * P) (c_pf is 0 in tiny)
  const cold = 0.05 + Math.max(1, B_MS * P);
  assert.ok(a.ttft >= 0.9 * cold, `cold TTFT ${a.ttft} ms, model ${cold} ms`);
  assert.ok(b.ttft < a.ttft / 4, `cached TTFT ${b.ttft} ms vs cold ${a.ttft} ms`);

  // the ground truth agrees: cached_tokens and the engine's first token time
  const ra = await traceRecord('pfx-1');
  const rb = await traceRecord('pfx-2');
  assert.equal(ra.cached_tokens, 0);
  assert.equal(rb.cached_tokens, cached);
  const ttftA = (ra.first_token_ns - ra.arrival_ns) / 1e6;
  const ttftB = (rb.first_token_ns - rb.arrival_ns) / 1e6;
  assert.ok(ttftA >= 0.95 * cold, `engine TTFT ${ttftA} ms, model ${cold} ms`);
  assert.ok(ttftB < cold / 10, `engine TTFT with the cache ${ttftB} ms`);
});

test('a shared system prompt is cached up to its last whole block; non-streamed usage has it', async () => {
  const system = doc('second', 200);
  // the tokens of [system] alone are those the two requests share: 3 + system + 3
  const solo = await postJson(off.base, '/v1/chat/completions', {
    model, max_tokens: 1, messages: [{ role: 'system', content: system }],
  });
  assert.equal(solo.status, 200);
  const shared = solo.json.usage.prompt_tokens;
  const ask = (q) => postJson(sim.base, '/v1/chat/completions', {
    model, max_tokens: 3, ignore_eos: true,
    messages: [{ role: 'system', content: system }, { role: 'user', content: q }],
  });
  const a = await ask('Which volcanoes erupted in 1991?');
  const b = await ask('Name the largest coffee producers.');
  assert.equal(a.status, 200);
  assert.equal(b.status, 200);
  assert.deepEqual(a.json.usage.prompt_tokens_details, { cached_tokens: 0 });
  assert.deepEqual(b.json.usage.prompt_tokens_details, { cached_tokens: Math.floor(shared / 16) * 16 });
  assert.equal(b.json.usage.total_tokens, b.json.usage.prompt_tokens + 3);
  count(a.json.usage);
  count(b.json.usage);
});

test('completions: the same prompt twice', async () => {
  const prompt = doc('third', 100);
  const ask = () => postJson(sim.base, '/v1/completions', { model, prompt, max_tokens: 2, ignore_eos: true });
  const a = await ask();
  const b = await ask();
  const P = a.json.usage.prompt_tokens;
  assert.deepEqual(a.json.usage.prompt_tokens_details, { cached_tokens: 0 });
  assert.deepEqual(b.json.usage.prompt_tokens_details, { cached_tokens: Math.floor((P - 1) / 16) * 16 });
  count(a.json.usage);
  count(b.json.usage);
});

test("/metrics has vLLM's prefix cache counters, in tokens", async () => {
  const m = await (await fetch(sim.base + '/metrics')).text();
  const val = (name) => {
    const line = m.split('\n').find((l) => l.startsWith(name + '{'));
    assert.ok(line, `${name} missing`);
    return Number(line.split(' ').at(-1));
  };
  assert.match(m, /# TYPE vllm:prefix_cache_queries_total counter/);
  assert.match(m, /# TYPE vllm:prefix_cache_hits_total counter/);
  assert.equal(val('vllm:prefix_cache_queries_total'), sent.queried);
  assert.equal(val('vllm:prefix_cache_hits_total'), sent.hit);
  assert.ok(sent.hit > 0);
  assert.ok(Math.abs(val('vllm:gpu_prefix_cache_hit_rate') - sent.hit / sent.queried) < 1e-9);
});

test('prefix caching off: no prompt_tokens_details, counters stay 0', async () => {
  const body = { model, max_tokens: 1, messages: [{ role: 'user', content: doc('fourth', 50) }] };
  for (let i = 0; i < 2; i++) {
    const s = await streamChat(off.base, body);
    const usage = s.events.at(-1).usage;
    assert.deepEqual(Object.keys(usage), ['prompt_tokens', 'completion_tokens', 'total_tokens']);
    const r = await postJson(off.base, '/v1/chat/completions', body);
    assert.equal(r.json.usage.prompt_tokens_details, undefined);
  }
  const m = await (await fetch(off.base + '/metrics')).text();
  assert.match(m, /^vllm:prefix_cache_queries_total\{[^}]*\} 0$/m);
  assert.match(m, /^vllm:prefix_cache_hits_total\{[^}]*\} 0$/m);
});
