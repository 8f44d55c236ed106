// The simulator as a real process on loopback: wire format, errors, limits,
// shutdown. Run by meson (normal and sanitizer builds) with node --test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSim, postJson, sseData, connectRaw, sleep } from './lib.mjs';

let sim;
let model;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-sim-'));
const traceLog = path.join(tmp, 'trace.jsonl');
const answers = path.join(tmp, 'answers.jsonl');
fs.writeFileSync(answers, JSON.stringify({ prompt: 'What is the capital of France?', answer: 'The capital of France is Paris.' }) + '\n');

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--trace-log', traceLog,
    '--answers', answers, '--header-timeout', '300ms']);
  const res = await fetch(sim.base + '/v1/models');
  model = (await res.json()).data[0].id;
});

after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('startup prints address, profile and capacity', () => {
  assert.match(sim.output, /listening on http:\/\/127\.0\.0\.1:\d+/);
  assert.match(sim.output, /profile tiny/);
  assert.match(sim.output, /KV cache \d+ tokens/);
  assert.match(sim.output, /max_num_seqs \d+/);
});

test('models, health and metrics', async () => {
  const models = await (await fetch(sim.base + '/v1/models')).json();
  assert.equal(models.object, 'list');
  assert.equal(models.data[0].object, 'model');
  assert.equal(typeof models.data[0].id, 'string');
  const health = await fetch(sim.base + '/health');
  assert.equal(health.status, 200);
  await health.text();
  const metrics = await fetch(sim.base + '/metrics');
  assert.equal(metrics.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  const text = await metrics.text();
  for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc',
    'vllm:num_preemptions_total', 'vllm:time_to_first_token_seconds_bucket', 'vllm:e2e_request_latency_seconds_count',
    'vllm:prompt_tokens_total', 'vllm:generation_tokens_total']) {
    assert.ok(text.includes(name), `metrics lack ${name}`);
  }
});

test('streamed chat completion is the OpenAI wire format, field by field', async () => {
  const res = await postJson(sim.base, '/v1/chat/completions', {
    model, stream: true, stream_options: { include_usage: true }, max_tokens: 20, ignore_eos: true,
    messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Tell me about load testing.' }],
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const events = sseData(res.text);
  assert.equal(events.at(-1), '[DONE]');
  const chunks = events.slice(0, -1).map((d) => JSON.parse(d));
  const ids = new Set(chunks.map((c) => c.id));
  assert.equal(ids.size, 1);
  assert.match(chunks[0].id, /^chatcmpl-/);
  for (const c of chunks) {
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.model, model);
    assert.equal(typeof c.created, 'number');
  }
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  const withChoices = chunks.slice(0, -1);
  const finish = withChoices.at(-1).choices[0];
  assert.equal(finish.finish_reason, 'length');
  const content = withChoices.filter((c) => c.choices[0].delta.content);
  assert.equal(content.length, 20);
  for (const c of withChoices.slice(0, -1)) assert.equal(c.choices[0].finish_reason, null);
  assert.equal(usage.usage.completion_tokens, 20);
  assert.ok(usage.usage.prompt_tokens > 5);
  assert.equal(usage.usage.total_tokens, usage.usage.prompt_tokens + 20);
});

test('non-streamed chat completion carries message and usage', async () => {
  const res = await postJson(sim.base, '/v1/chat/completions', {
    model, max_tokens: 7, ignore_eos: true, messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(res.status, 200);
  const b = res.json;
  assert.equal(b.object, 'chat.completion');
  assert.match(b.id, /^chatcmpl-/);
  assert.equal(b.choices.length, 1);
  assert.equal(b.choices[0].index, 0);
  assert.equal(b.choices[0].message.role, 'assistant');
  assert.equal(typeof b.choices[0].message.content, 'string');
  assert.equal(b.choices[0].finish_reason, 'length');
  assert.equal(b.usage.completion_tokens, 7);
  assert.equal(b.usage.total_tokens, b.usage.prompt_tokens + 7);
});

test('streamed completions use text_completion chunks', async () => {
  const res = await postJson(sim.base, '/v1/completions', {
    model, prompt: 'Once upon a time', stream: true, max_tokens: 5, ignore_eos: true,
  });
  assert.equal(res.status, 200);
  const events = sseData(res.text);
  assert.equal(events.at(-1), '[DONE]');
  const chunks = events.slice(0, -1).map((d) => JSON.parse(d));
  for (const c of chunks) assert.equal(c.object, 'text_completion');
  assert.match(chunks[0].id, /^cmpl-/);
  const text = chunks.map((c) => c.choices[0]?.text ?? '').join('');
  assert.ok(text.length > 0);
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
});

test('stop strings and natural stops end with finish_reason stop', async () => {
  const res = await postJson(sim.base, '/v1/chat/completions', {
    model, max_tokens: 500, messages: [{ role: 'user', content: 'What is the capital of France?' }],
  });
  assert.equal(res.status, 200);
  assert.equal(res.json.choices[0].message.content, 'The capital of France is Paris.');
  assert.equal(res.json.choices[0].finish_reason, 'stop');
  const cut = await postJson(sim.base, '/v1/chat/completions', {
    model, max_tokens: 500, stop: [' is'], messages: [{ role: 'user', content: 'What is the capital of France?' }],
  });
  assert.equal(cut.json.choices[0].message.content, 'The capital of France');
  assert.equal(cut.json.choices[0].finish_reason, 'stop');
});

test('seed and temperature 0 make answers repeatable', async () => {
  const body = { model, max_tokens: 12, ignore_eos: true, seed: 42, messages: [{ role: 'user', content: 'x' }] };
  const a = await postJson(sim.base, '/v1/chat/completions', body);
  const b = await postJson(sim.base, '/v1/chat/completions', body);
  assert.equal(a.json.choices[0].message.content, b.json.choices[0].message.content);
  const c = await postJson(sim.base, '/v1/chat/completions', { ...body, seed: 43 });
  assert.notEqual(a.json.choices[0].message.content, c.json.choices[0].message.content);
});

test('embeddings are deterministic, normalised and honour dimensions', async () => {
  const res = await postJson(sim.base, '/v1/embeddings', { model, input: ['hello world', 'hello world!', 'zebra'], dimensions: 64 });
  assert.equal(res.status, 200);
  const b = res.json;
  assert.equal(b.object, 'list');
  assert.equal(b.data.length, 3);
  b.data.forEach((d, i) => {
    assert.equal(d.object, 'embedding');
    assert.equal(d.index, i);
    assert.equal(d.embedding.length, 64);
    const norm = Math.hypot(...d.embedding);
    assert.ok(Math.abs(norm - 1) < 1e-4, `norm ${norm}`);
  });
  const cos = (x, y) => x.reduce((s, v, i) => s + v * y[i], 0);
  assert.ok(cos(b.data[0].embedding, b.data[1].embedding) > cos(b.data[0].embedding, b.data[2].embedding));
  assert.ok(b.usage.prompt_tokens > 0);
  assert.equal(b.usage.total_tokens, b.usage.prompt_tokens);
  const again = await postJson(sim.base, '/v1/embeddings', { model, input: 'hello world', dimensions: 64 });
  assert.deepEqual(again.json.data[0].embedding, b.data[0].embedding);
});

function assertOpenAIError(res, status) {
  assert.equal(res.status, status, res.text);
  assert.ok(res.json && res.json.error, `no error object in ${res.text}`);
  assert.equal(typeof res.json.error.message, 'string');
  assert.ok('type' in res.json.error && 'param' in res.json.error && 'code' in res.json.error);
}

test('bad requests get the right status and an OpenAI error body', async () => {
  assertOpenAIError(await postJson(sim.base, '/v1/chat/completions', '{"model": '), 400);
  assertOpenAIError(await postJson(sim.base, '/v1/chat/completions', { model }), 400);
  const wrongType = await postJson(sim.base, '/v1/chat/completions', { model, max_tokens: 'ten', messages: [{ role: 'user', content: 'x' }] });
  assertOpenAIError(wrongType, 400);
  assert.equal(wrongType.json.error.param, 'max_tokens');
  assertOpenAIError(await postJson(sim.base, '/v1/chat/completions', { model, n: 2, messages: [{ role: 'user', content: 'x' }] }), 400);
  assertOpenAIError(await postJson(sim.base, '/v1/chat/completions', { model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }), 404);
  const long = await postJson(sim.base, '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'word '.repeat(300000) }] });
  assertOpenAIError(long, 400);
  assert.match(long.json.error.message, /context length|maximum context/i);
  const unknown = await fetch(sim.base + '/v1/nothing', { method: 'POST', body: '{}' });
  assert.equal(unknown.status, 404);
  await unknown.text();
  const wrongMethod = await fetch(sim.base + '/v1/chat/completions');
  assert.equal(wrongMethod.status, 405);
  await wrongMethod.text();
});

test('a client sending headers one byte at a time is cut after the header timeout', async () => {
  const s = await connectRaw(sim.port);
  const req = 'GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(100) + '\r\n\r\n';
  let closed = false;
  s.on('close', () => { closed = true; });
  s.on('error', () => { closed = true; });
  const t0 = Date.now();
  for (let i = 0; i < req.length && !closed && Date.now() - t0 < 5000; i++) {
    s.write(req[i]);
    await sleep(50);
  }
  assert.ok(closed, 'connection was not cut');
  const elapsed = Date.now() - t0;
  assert.ok(elapsed >= 250 && elapsed < 3000, `cut after ${elapsed} ms`);
  s.destroy();
});

test('the trace log holds the ground truth of each request', async () => {
  const res = await postJson(sim.base, '/v1/chat/completions', {
    model, stream: true, max_tokens: 9, ignore_eos: true, messages: [{ role: 'user', content: 'trace me' }],
  }, { 'x-request-id': 'trace-me-1' });
  assert.equal(res.status, 200);
  let rec;
  for (let i = 0; i < 50 && !rec; i++) {
    await sleep(100);
    const lines = fs.existsSync(traceLog) ? fs.readFileSync(traceLog, 'utf8').split('\n').filter(Boolean) : [];
    rec = lines.map((l) => JSON.parse(l)).find((r) => r.request_id === 'trace-me-1');
  }
  assert.ok(rec, 'no trace record');
  assert.equal(rec.output_tokens, 9);
  assert.equal(rec.token_ns.length, 9);
  assert.ok(rec.arrival_ns <= rec.admitted_ns && rec.admitted_ns <= rec.first_token_ns);
  // first_token_ns is when the engine produced the token; token_ns when it was written
  assert.ok(rec.token_ns[0] >= rec.first_token_ns && rec.token_ns[0] - rec.first_token_ns < 50e6);
  for (let i = 1; i < 9; i++) assert.ok(rec.token_ns[i] >= rec.token_ns[i - 1]);
  assert.ok(rec.finish_ns >= rec.token_ns[8]);
});
