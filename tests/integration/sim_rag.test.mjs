// The simulator's pieces for RAG and agent flows, as a real process on
// loopback: the vector store search endpoint and tool-call answers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, startSim, postJson, sseData, sleep } from './lib.mjs';

let sim;
let model;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-sim-rag-'));
const traceLog = path.join(tmp, 'trace.jsonl');

const searchTool = {
  type: 'function',
  function: {
    name: 'search_docs',
    description: 'Search the knowledge base.',
    parameters: { type: 'object', properties: { query: { type: 'string' }, top_k: { type: 'integer' } }, required: ['query'] },
  },
};
const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer' } },
      required: ['city', 'unit', 'days'],
    },
  },
};
const question = 'How do volcanoes erupt and what comes out of them?';

before(async () => {
  // a search costs 40 ms (no per-passage cost), so its latency can be asserted
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--vector-store-id', 'vs_kb',
    '--vector-latency', '40ms', '--vector-doc-latency', '0', '--trace-log', traceLog]);
  model = (await (await fetch(sim.base + '/v1/models')).json()).data[0].id;
});

after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

function assertOpenAIError(res, status, param) {
  assert.equal(res.status, status, res.text);
  assert.ok(res.json && res.json.error, `no error object in ${res.text}`);
  assert.equal(typeof res.json.error.message, 'string');
  assert.ok('type' in res.json.error && 'code' in res.json.error);
  if (param !== undefined) assert.equal(res.json.error.param, param);
}

async function metric(name) {
  const text = await (await fetch(sim.base + '/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(name + '{'));
  assert.ok(line, `no ${name} in /metrics`);
  return Number(line.split(' ').at(-1));
}

test('vector store search returns a search results page, best first', async () => {
  const before = await metric('tokenstorm_sim_vector_searches_total');
  const t0 = performance.now();
  const res = await postJson(sim.base, '/v1/vector_stores/vs_default/search', {
    query: 'How do volcanoes erupt?', max_num_results: 5, rewrite_query: false, filters: { type: 'eq', key: 'topic', value: 'x' },
  });
  const elapsed = performance.now() - t0;
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers.get('content-type'), /^application\/json/);
  const page = res.json;
  assert.deepEqual(Object.keys(page), ['object', 'search_query', 'data', 'has_more', 'next_page']);
  assert.equal(page.object, 'vector_store.search_results.page');
  assert.deepEqual(page.search_query, ['How do volcanoes erupt?']);
  assert.equal(page.has_more, false);
  assert.equal(page.next_page, null);
  assert.equal(page.data.length, 5);
  for (const r of page.data) {
    assert.deepEqual(Object.keys(r), ['file_id', 'filename', 'score', 'attributes', 'content']);
    assert.match(r.file_id, /^file-sim\d{3}$/);
    assert.match(r.filename, /\.txt$/);
    assert.ok(r.score >= 0 && r.score <= 1);
    assert.equal(r.content.length, 1);
    assert.equal(r.content[0].type, 'text');
    assert.ok(r.content[0].text.length > 10);
  }
  for (let i = 1; i < 5; i++) assert.ok(page.data[i - 1].score >= page.data[i].score);
  // the question's topic comes first
  for (const r of page.data.slice(0, 3)) assert.equal(r.attributes.topic, 'volcanoes');
  assert.match(page.data[0].content[0].text, /volcanoes/);
  // the simulated search time (40 ms) passed on the server's timer
  assert.ok(elapsed >= 39, `answered after ${elapsed} ms`);
  assert.ok(elapsed < 2000, `answered after ${elapsed} ms`);
  assert.equal(await metric('tokenstorm_sim_vector_searches_total'), before + 1);
});

test('search: default count, array queries, the configured id and a score threshold', async () => {
  const all = await postJson(sim.base, '/v1/vector_stores/vs_kb/search', { query: ['coffee', 'espresso beans'] });
  assert.equal(all.status, 200, all.text);
  assert.equal(all.json.data.length, 10); // max_num_results defaults to 10
  assert.deepEqual(all.json.search_query, ['coffee', 'espresso beans']);
  assert.equal(all.json.data[0].attributes.topic, 'coffee');
  const threshold = (all.json.data[2].score + all.json.data[3].score) / 2;
  const cut = await postJson(sim.base, '/v1/vector_stores/vs_kb/search', {
    query: ['coffee', 'espresso beans'], ranking_options: { ranker: 'auto', score_threshold: threshold },
  });
  assert.equal(cut.status, 200, cut.text);
  assert.deepEqual(cut.json.data.map((r) => r.file_id), all.json.data.slice(0, 3).map((r) => r.file_id));
  const many = await postJson(sim.base, '/v1/vector_stores/vs_kb/search', { query: 'jazz', max_num_results: 50 });
  assert.equal(many.json.data.length, 50);
});

test('search errors: unknown store 404, bad bodies 400, wrong method 405', async () => {
  const nf = await postJson(sim.base, '/v1/vector_stores/vs_nope/search', { query: 'x' });
  assertOpenAIError(nf, 404, null);
  assert.match(nf.json.error.message, /No vector store found with id 'vs_nope'/);
  assertOpenAIError(await postJson(sim.base, '/v1/vector_stores/vs_default/search', '{"query": '), 400, null);
  assertOpenAIError(await postJson(sim.base, '/v1/vector_stores/vs_default/search', {}), 400, 'query');
  assertOpenAIError(await postJson(sim.base, '/v1/vector_stores/vs_default/search', { query: '' }), 400, 'query');
  assertOpenAIError(await postJson(sim.base, '/v1/vector_stores/vs_default/search', { query: 'x', max_num_results: 51 }), 400, 'max_num_results');
  assertOpenAIError(await postJson(sim.base, '/v1/vector_stores/vs_default/search',
    { query: 'x', ranking_options: { score_threshold: 2 } }), 400, 'ranking_options.score_threshold');
  const get = await fetch(sim.base + '/v1/vector_stores/vs_default/search');
  assert.equal(get.status, 405);
  await get.text();
  const other = await fetch(sim.base + '/v1/vector_stores/vs_default/files', { method: 'POST', body: '{}' });
  assert.equal(other.status, 404);
  await other.text();
});

test('searches go into the trace log', async () => {
  const res = await postJson(sim.base, '/v1/vector_stores/vs_default/search', { query: 'chess' }, { 'x-request-id': 'rag-search-1' });
  assert.equal(res.status, 200);
  let rec;
  for (let i = 0; i < 50 && !rec; i++) {
    await sleep(100);
    const lines = fs.existsSync(traceLog) ? fs.readFileSync(traceLog, 'utf8').split('\n').filter(Boolean) : [];
    rec = lines.map((l) => JSON.parse(l)).find((r) => r.request_id === 'rag-search-1');
  }
  assert.ok(rec, 'no trace record');
  assert.equal(rec.endpoint, 'vector_store.search');
  assert.equal(rec.status, 'finished');
  assert.equal(rec.results, 10);
  assert.ok(rec.finish_ns - rec.arrival_ns >= 39e6, `search took ${rec.finish_ns - rec.arrival_ns} ns`);
});

test('a chat request with tools is answered with a tool call', async () => {
  const res = await postJson(sim.base, '/v1/chat/completions', {
    model, seed: 7, tools: [searchTool, weatherTool], messages: [{ role: 'system', content: 'Use tools.' }, { role: 'user', content: question }],
  });
  assert.equal(res.status, 200, res.text);
  const b = res.json;
  assert.equal(b.object, 'chat.completion');
  const c = b.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.role, 'assistant');
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.match(call.id, /^call_[0-9a-f]{24}$/);
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'search_docs');
  assert.equal(typeof call.function.arguments, 'string');
  // the required string parameter gets the first 8 words of the question
  assert.deepEqual(JSON.parse(call.function.arguments), { query: 'How do volcanoes erupt and what comes out' });
  assert.ok(b.usage.completion_tokens >= 5);
  assert.equal(b.usage.total_tokens, b.usage.prompt_tokens + b.usage.completion_tokens);
  // the same seed gives the same call id
  const again = await postJson(sim.base, '/v1/chat/completions', {
    model, seed: 7, tools: [searchTool, weatherTool], messages: [{ role: 'system', content: 'Use tools.' }, { role: 'user', content: question }],
  });
  assert.equal(again.json.choices[0].message.tool_calls[0].id, call.id);
  // tool_choice names another tool: enum, integer and string parameters are filled
  const named = await postJson(sim.base, '/v1/chat/completions', {
    model, tools: [searchTool, weatherTool], tool_choice: { type: 'function', function: { name: 'get_weather' } },
    messages: [{ role: 'user', content: 'Weather in "Paris"?' }],
  });
  assert.equal(named.status, 200, named.text);
  const nc = named.json.choices[0].message.tool_calls[0];
  assert.equal(nc.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(nc.function.arguments), { city: 'Weather in "Paris"?', unit: 'celsius', days: 1 });
});

test('a streamed tool call uses the delta format and streams its arguments', async () => {
  const res = await postJson(sim.base, '/v1/chat/completions', {
    model, stream: true, stream_options: { include_usage: true }, tools: [searchTool], tool_choice: 'required',
    messages: [{ role: 'user', content: question }],
  });
  assert.equal(res.status, 200, res.text);
  const events = sseData(res.text);
  assert.equal(events.at(-1), '[DONE]');
  const chunks = events.slice(0, -1).map((d) => JSON.parse(d));
  for (const ch of chunks) assert.equal(ch.object, 'chat.completion.chunk');
  const first = chunks[0].choices[0].delta;
  assert.equal(first.role, 'assistant');
  assert.equal(first.content, null);
  assert.equal(first.tool_calls.length, 1);
  assert.deepEqual(Object.keys(first.tool_calls[0]), ['index', 'id', 'type', 'function']);
  assert.equal(first.tool_calls[0].index, 0);
  assert.match(first.tool_calls[0].id, /^call_[0-9a-f]{24}$/);
  assert.equal(first.tool_calls[0].type, 'function');
  assert.deepEqual(first.tool_calls[0].function, { name: 'search_docs', arguments: '' });
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  const finish = chunks.at(-2).choices[0];
  assert.equal(finish.finish_reason, 'tool_calls');
  assert.deepEqual(finish.delta, {});
  const argChunks = chunks.slice(1, -2);
  assert.ok(argChunks.length >= 5, `${argChunks.length} argument chunks`);
  let args = '';
  for (const ch of argChunks) {
    const d = ch.choices[0].delta;
    assert.equal(ch.choices[0].finish_reason, null);
    assert.equal(d.content, undefined);
    assert.equal(d.tool_calls.length, 1);
    assert.equal(d.tool_calls[0].index, 0);
    assert.equal(d.tool_calls[0].id, undefined);
    args += d.tool_calls[0].function.arguments;
  }
  assert.deepEqual(JSON.parse(args), { query: 'How do volcanoes erupt and what comes out' });
  // one output token per argument piece
  assert.equal(usage.usage.completion_tokens, argChunks.length);
});

test('max_tokens cuts a tool call: finish_reason length', async () => {
  const res = await postJson(sim.base, '/v1/chat/completions', {
    model, max_tokens: 3, tools: [searchTool], messages: [{ role: 'user', content: question }],
  });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.choices[0].finish_reason, 'length');
  assert.equal(res.json.choices[0].message.tool_calls[0].function.arguments, '{"query');
  assert.equal(res.json.usage.completion_tokens, 3);
});

test('the agent round trip: after a tool result the answer is text', async () => {
  const first = await postJson(sim.base, '/v1/chat/completions', {
    model, tools: [searchTool], messages: [{ role: 'user', content: question }],
  });
  const call = first.json.choices[0].message.tool_calls[0];
  const search = await postJson(sim.base, '/v1/vector_stores/vs_default/search', JSON.parse(call.function.arguments));
  assert.equal(search.status, 200);
  const context = search.json.data.map((r) => r.content[0].text).join('\n');
  for (const stream of [false, true]) {
    const res = await postJson(sim.base, '/v1/chat/completions', {
      model, stream, tools: [searchTool], max_tokens: 12, ignore_eos: true,
      messages: [
        { role: 'user', content: question },
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: call.id, content: context },
      ],
    });
    assert.equal(res.status, 200, res.text);
    if (!stream) {
      const m = res.json.choices[0];
      assert.equal(m.finish_reason, 'length');
      assert.equal(typeof m.message.content, 'string');
      assert.ok(m.message.content.length > 0);
      assert.equal(m.message.tool_calls, undefined);
      assert.equal(res.json.usage.completion_tokens, 12);
      // the tool result is part of the prompt
      assert.ok(res.json.usage.prompt_tokens > first.json.usage.prompt_tokens + 20);
    } else {
      const chunks = sseData(res.text).slice(0, -1).map((d) => JSON.parse(d));
      assert.equal(chunks.filter((ch) => ch.choices[0]?.delta?.content).length, 12);
      assert.ok(chunks.every((ch) => !ch.choices[0]?.delta?.tool_calls));
      assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
    }
  }
  // tool_choice "none" answers in text too
  const none = await postJson(sim.base, '/v1/chat/completions', {
    model, tools: [searchTool], tool_choice: 'none', max_tokens: 4, messages: [{ role: 'user', content: question }],
  });
  assert.equal(typeof none.json.choices[0].message.content, 'string');
  assert.notEqual(none.json.choices[0].finish_reason, 'tool_calls');
});

test('bad tools and tool messages get 400', async () => {
  const msgs = [{ role: 'user', content: 'x' }];
  for (const tools of [
    [{ type: 'function' }],
    [{ type: 'function', function: { name: 'has space' } }],
    [{ type: 'function', function: { name: 'x'.repeat(65) } }],
    [{ type: 'function', function: { name: 'ok', parameters: 'nope' } }],
    [{ type: 'retrieval', function: { name: 'ok' } }],
    ['search'],
  ]) {
    assertOpenAIError(await postJson(sim.base, '/v1/chat/completions', { model, tools, messages: msgs }), 400, 'tools');
  }
  assertOpenAIError(await postJson(sim.base, '/v1/chat/completions', { model, tools: {}, messages: msgs }), 400, 'tools');
  assertOpenAIError(await postJson(sim.base, '/v1/chat/completions', {
    model, tools: [searchTool], tool_choice: { type: 'function', function: { name: 'other' } }, messages: msgs,
  }), 400, 'tool_choice');
  assertOpenAIError(await postJson(sim.base, '/v1/chat/completions', { model, tools: [searchTool], tool_choice: 'always', messages: msgs }), 400, 'tool_choice');
  assertOpenAIError(await postJson(sim.base, '/v1/chat/completions', {
    model, messages: [...msgs, { role: 'tool', content: 'result' }],
  }), 400, 'messages.[1].tool_call_id');
  assertOpenAIError(await postJson(sim.base, '/v1/chat/completions', {
    model, messages: [...msgs, { role: 'assistant', content: null, tool_calls: 'x' }],
  }), 400, 'messages.[1].tool_calls');
});

test('--vector-docs replaces the passages; a bad file stops the start', async () => {
  const docs = path.join(tmp, 'kb.jsonl');
  fs.writeFileSync(docs, [
    { id: 'file-paris', filename: 'france.md', text: 'Paris is the capital of France.', attributes: { country: 'FR' } },
    { text: 'Berlin is the capital of Germany.' },
    { text: 'Madrid is the capital of Spain.' },
  ].map((d) => JSON.stringify(d)).join('\n') + '\n');
  const kb = await startSim(['--profile', 'tiny', '--vector-docs', docs, '--vector-latency', '0']);
  try {
    const res = await postJson(kb.base, '/v1/vector_stores/vs_default/search', { query: 'capital of France' });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.data.length, 3);
    assert.deepEqual(res.json.data[0], {
      file_id: 'file-paris', filename: 'france.md', score: res.json.data[0].score, attributes: { country: 'FR' },
      content: [{ type: 'text', text: 'Paris is the capital of France.' }],
    });
    assert.equal(res.json.data[1].attributes && Object.keys(res.json.data[1].attributes).length, 0);
  } finally {
    await kb.stop('SIGKILL');
  }
  const bad = path.join(tmp, 'bad.jsonl');
  fs.writeFileSync(bad, '{"text": "ok"}\n{"txt": "typo"}\n');
  const proc = spawn(BIN, ['sim', '--listen', '127.0.0.1:0', '--vector-docs', bad], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const timer = setTimeout(() => proc.kill('SIGKILL'), 10000);
  const code = await new Promise((resolve) => proc.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  assert.notEqual(code, 0);
  assert.match(stderr, /bad\.jsonl:2: unknown key "txt"/);
});
