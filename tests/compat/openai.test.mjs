// The official `openai` npm client talks to the simulator as it would to OpenAI.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startSim } from '../integration/lib.mjs';

let sim;
let client;
let model;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise']);
  client = new OpenAI({ baseURL: sim.base + '/v1', apiKey: 'sk-test-not-a-secret', timeout: 20000, maxRetries: 0 });
  const models = await client.models.list();
  model = models.data[0].id;
});

after(async () => { if (sim) await sim.stop('SIGKILL'); });

test('streams a chat completion with usage', async () => {
  const stream = await client.chat.completions.create({
    model, stream: true, stream_options: { include_usage: true }, max_tokens: 16,
    messages: [{ role: 'user', content: 'Say something.' }], ignore_eos: true,
  });
  let text = '';
  let chunks = 0;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta?.content) { text += c.delta.content; chunks++; }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(chunks, 16);
  assert.ok(text.length > 0);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 16);
});

test('non-streamed chat completion', async () => {
  const r = await client.chat.completions.create({ model, max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }], ignore_eos: true });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.usage.completion_tokens, 5);
});

test('embeddings, as floats and as base64', async () => {
  const r = await client.embeddings.create({ model, input: ['a b c', 'd e f'] });
  assert.equal(r.data.length, 2);
  assert.ok(r.data[0].embedding.length > 0);
  const norm = Math.hypot(...r.data[0].embedding);
  assert.ok(Math.abs(norm - 1) < 1e-4);
  // the client asks for base64 by default and decodes it; ask for floats explicitly too
  const f = await client.embeddings.create({ model, input: 'a b c', encoding_format: 'float' });
  assert.deepEqual(f.data[0].embedding.map((x) => x.toFixed(5)), r.data[0].embedding.map((x) => x.toFixed(5)));
});

test('errors surface as typed API errors', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404,
  );
  await assert.rejects(
    client.chat.completions.create({ model, n: 3, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.BadRequestError,
  );
});

test('vector store search and a tool-call round trip', async () => {
  const page = await client.vectorStores.search('vs_default', { query: 'How do volcanoes erupt?', max_num_results: 3 });
  assert.equal(page.data.length, 3);
  assert.equal(page.data[0].attributes.topic, 'volcanoes');
  assert.equal(page.data[0].content[0].type, 'text');
  const tools = [{
    type: 'function',
    function: { name: 'search_docs', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } },
  }];
  const messages = [{ role: 'user', content: 'How do volcanoes erupt?' }];
  const r = await client.chat.completions.create({ model, tools, messages });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const call = r.choices[0].message.tool_calls[0];
  assert.deepEqual(JSON.parse(call.function.arguments), { query: 'How do volcanoes erupt?' });
  // the client's stream helper assembles the streamed call from its deltas
  const stream = client.chat.completions.stream({ model, tools, messages, stream: true });
  const final = await stream.finalChatCompletion();
  const streamed = final.choices[0].message.tool_calls[0];
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(streamed.function.name, 'search_docs');
  assert.deepEqual(JSON.parse(streamed.function.arguments), { query: 'How do volcanoes erupt?' });
  // the tool's result goes back; the answer is text
  const answer = await client.chat.completions.create({
    model, tools, max_tokens: 5, ignore_eos: true,
    messages: [...messages, { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: page.data[0].content[0].text }],
  });
  assert.equal(typeof answer.choices[0].message.content, 'string');
  assert.equal(answer.usage.completion_tokens, 5);
});
