// A server that puts several tokens in one chunk is not a usage disagreement:
// only a client tokenizer's count of the answer is compared with the server's
// usage, and only beyond 2 tokens and 5 % (docs/METRICS.md, "Tokens"). Both
// HTTP engines.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { runBin } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-usage-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));
// one token per byte (256 single-byte ranks): "Hello there, friend!" is 20 tokens
const TOKENIZER = new URL('../../examples/scenarios/data/full-bytes-cl100k.tiktoken', import.meta.url).pathname;

const run = (args, { timeoutMs = 60000 } = {}) => runBin(['run', ...args], { timeoutMs });

const base = { id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'm' };
const ev = (o) => `data: ${JSON.stringify({ ...base, ...o })}\n\n`;
// 20 tokens in 3 chunks, with the usage the server reports
const stream = (completionTokens) =>
  ev({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) +
  ev({ choices: [{ index: 0, delta: { content: 'Hello ' }, finish_reason: null }] }) +
  ev({ choices: [{ index: 0, delta: { content: 'there, ' }, finish_reason: null }] }) +
  ev({ choices: [{ index: 0, delta: { content: 'friend!' }, finish_reason: 'stop' }] }) +
  ev({ choices: [], usage: { prompt_tokens: 5, completion_tokens: completionTokens, total_tokens: 5 + completionTokens } }) +
  'data: [DONE]\n\n';

async function withServer(completionTokens, fn) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(stream(completionTokens));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    return await fn(`http://127.0.0.1:${server.address().port}`);
  } finally {
    server.close();
    server.closeAllConnections();
  }
}

async function measure(target, engine, extra, name) {
  const out = path.join(tmp, name);
  const r = await run(['--target', target, '--model', 'm', '--rate', '50', '--requests', '5',
    '--http-engine', engine, '--save-requests', '--out', out, ...extra]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const res = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  const reqs = fs.readFileSync(path.join(out, 'requests.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  return { r, res, reqs };
}

for (const engine of ['auto', 'curl']) {
  test(`${engine}: several tokens per chunk agree with usage; a tokenizer count that does not, disagrees`, async () => {
    // 20 tokens in 3 content chunks, no tokenizer: chunk counts never disagree
    await withServer(20, async (target) => {
      const { r, res, reqs } = await measure(target, engine, [], `${engine}-chunks`);
      assert.equal(res.tokens.usage_mismatch, 0, JSON.stringify(res.tokens));
      assert.match(r.stdout, /0 usage disagreements/);
      for (const q of reqs) {
        assert.equal(q.usage_mismatch, false);
        assert.equal(q.content_chunks, 3);
        assert.equal(q.output_tokens, 20);
      }
      // with the tokenizer: 20 tokens counted, 20 in usage
      const t = await measure(target, engine, ['--tokenizer', TOKENIZER], `${engine}-tok-agree`);
      assert.equal(t.res.tokens.usage_mismatch, 0);
      for (const q of t.reqs) assert.equal(q.client_tokens, 20, JSON.stringify(q));
    });
    // a stop token the text does not show is within the slack
    await withServer(21, async (target) => {
      const t = await measure(target, engine, ['--tokenizer', TOKENIZER], `${engine}-tok-stop`);
      assert.equal(t.res.tokens.usage_mismatch, 0);
    });
    // usage says 40 where the answer has 20 tokens: a disagreement
    await withServer(40, async (target) => {
      const t = await measure(target, engine, ['--tokenizer', TOKENIZER], `${engine}-tok-disagree`);
      assert.equal(t.res.tokens.usage_mismatch, 5);
      assert.match(t.r.stdout, /5 usage disagreements/);
      for (const q of t.reqs) {
        assert.equal(q.usage_mismatch, true);
        assert.equal(q.usage_completion_tokens, 40);
        assert.equal(q.client_tokens, 20);
      }
    });
  });
}
