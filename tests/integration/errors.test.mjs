// Every failure explained: the server's own reason for each failed request
// (OpenAI, vLLM and FastAPI error bodies, plain text, an error event in a
// stream) reaches requests.jsonl, the console summary, result.json and the
// HTML report; stream integrity counts only streams that began; gzip and
// deflate answers are decoded on both HTTP engines.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { runBin } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-errors-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const tool = (cmd, args, opts) => runBin([cmd, ...args], opts);

const readJsonl = (f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const chunk = (obj) => `data: ${JSON.stringify(obj)}\n\n`;
const base = { id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'm' };
const content = (t) => chunk({ ...base, choices: [{ index: 0, delta: { content: t }, finish_reason: null }] });
const finish = chunk({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
const okStream = content('a') + content('b') + finish + 'data: [DONE]\n\n';

// What each kind of request gets, and what the run must say about it:
// [outcome, status, message].
const kinds = {
  openai429: [(res) => { res.writeHead(429, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'Rate limit reached for requests', type: 'requests', param: null, code: 'rate_limit_exceeded' } })); },
    'http_429', 429, 'Rate limit reached for requests (type: requests, code: rate_limit_exceeded)'],
  vllm500: [(res) => { res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'error', message: 'CUDA out of memory', type: 'InternalServerError', param: null, code: 500 })); },
    'http_5xx', 500, 'CUDA out of memory (type: InternalServerError, code: 500)'],
  fastapiText: [(res) => { res.writeHead(503, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ detail: 'Model is loading' })); },
    'http_5xx', 503, 'Model is loading'],
  fastapiList: [(res) => { res.writeHead(422, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ detail: [{ loc: ['body', 'messages', 0], msg: 'field required', type: 'value_error.missing' },
      { loc: ['body', 'model'], msg: 'str type expected', type: 'type_error.str' }] })); },
    'http_4xx', 422, 'body.messages.0: field required (+1 more)'],
  plain: [(res) => { res.writeHead(502, { 'content-type': 'text/plain' });
    res.end('Bad gateway:\n\tupstream\u0001 reset\n'); },
    'http_5xx', 502, 'Bad gateway: upstream reset'],
  empty: [(res) => { res.writeHead(500); res.end(); }, 'http_5xx', 500, 'empty body'],
  errorEvent: [(res) => { res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(content('a') + chunk({ error: { message: 'engine overloaded', type: 'server_error', code: 'overloaded' } }) + 'data: [DONE]\n\n'); },
    'stream_error', 200, 'engine overloaded (type: server_error, code: overloaded)'],
  noDone: [(res) => { res.writeHead(200, { 'content-type': 'text/event-stream' }); res.end(content('a') + finish); },
    'truncated', 200, null],
  ok: [(res) => { res.writeHead(200, { 'content-type': 'text/event-stream' }); res.end(okStream); }, 'ok', 200, null],
};
const order = Object.keys(kinds);

function serve(handler) {
  const server = http.createServer((req, res) => {
    const idx = Number((req.headers['x-request-id'] || '').split('-')[2]);
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => handler(idx, req, res, body));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function withServer(handler, fn) {
  const server = await serve(handler);
  try {
    return await fn(`http://127.0.0.1:${server.address().port}`);
  } finally {
    server.close();
    server.closeAllConnections();
  }
}

const reps = 2;
const n = order.length * reps;

test('every failed request carries the server\'s reason, counted by message', async () => {
  await withServer((idx, req, res) => kinds[order[idx % order.length]][0](res), async (target) => {
    const out = path.join(tmp, 'reasons');
    const r = await tool('run', ['--target', target, '--model', 'm', '--rate', '50', '--requests', String(n),
      '--save-requests', '--out', out]);
    assert.equal(r.code, 0, r.stderr);
    const reqs = readJsonl(path.join(out, 'requests.jsonl'));
    assert.equal(reqs.length, n);
    for (const q of reqs) {
      const [, outcome, status, msg] = kinds[order[q.id % order.length]];
      assert.equal(q.outcome, outcome, JSON.stringify(q));
      assert.equal(q.http_status, status, JSON.stringify(q));
      if (msg !== null) assert.equal(q.error, msg, JSON.stringify(q));
    }
    // result.json: every distinct reason with its count, outcome and status
    const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
    const failing = order.filter((k) => kinds[k][1] !== 'ok');
    assert.equal(result.errors.other, 0);
    assert.equal(result.errors.distinct_kept, failing.length);
    for (const k of failing) {
      const [, outcome, status, msg] = kinds[k];
      const row = result.errors.top.find((e) => e.outcome === outcome && (msg === null || e.message === msg));
      assert.ok(row, `${k} missing in ${JSON.stringify(result.errors.top)}`);
      assert.equal(row.count, reps);
      assert.equal(row.status, status);
    }
    // the console summary names the reasons
    for (const k of ['openai429', 'vllm500', 'fastapiText', 'errorEvent', 'plain'])
      assert.ok(r.stdout.includes(kinds[k][3]), `summary lacks ${k}: ${r.stdout}`);
    assert.match(r.stdout, /errors +count +outcome +status +message/);

    // the HTML report shows them (escaped)
    const html = path.join(tmp, 'reasons.html');
    const rep = await tool('report', ['--format', 'html', '-o', html, out]);
    assert.equal(rep.code, 0, rep.stderr);
    const page = fs.readFileSync(html, 'utf8');
    assert.ok(page.includes('Why requests failed'));
    assert.ok(page.includes('CUDA out of memory (type: InternalServerError, code: 500)'));

    // merged across processes: the counts add up
    const out2 = path.join(tmp, 'reasons2');
    const r2 = await tool('run', ['--target', target, '--model', 'm', '--rate', '50', '--requests', String(n),
      '--out', out2, '-q']);
    assert.equal(r2.code, 0, r2.stderr);
    const merged = path.join(tmp, 'merged');
    const m = await tool('merge', ['-q', merged, out, out2]);
    assert.equal(m.code, 0, m.stderr + m.stdout);
    const mres = JSON.parse(fs.readFileSync(path.join(merged, 'result.json'), 'utf8'));
    const row = mres.errors.top.find((e) => e.status === 500 && e.message.startsWith('CUDA'));
    assert.equal(row.count, 2 * reps);
  });
});

test('stream integrity counts only the streams that began', async () => {
  await withServer((idx, req, res) => kinds[order[idx % order.length]][0](res), async (target) => {
    const out = path.join(tmp, 'began');
    const r = await tool('run', ['--target', target, '--model', 'm', '--rate', '50', '--requests', String(n),
      '--out', out, '-q']);
    assert.equal(r.code, 0, r.stderr);
    const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
    assert.equal(result.streams.streamed, n);
    // 429, 500, 503, 422, 502 and an empty 500 are no streams: not counted
    assert.equal(result.streams.no_done, reps, 'only the noDone streams lack [DONE]');
    assert.equal(result.streams.no_finish, reps, 'only the errorEvent streams lack finish_reason');
  });
  // nothing listening: connect errors are not streams without [DONE]
  const closed = await serve(() => {});
  const port = closed.address().port;
  await new Promise((r) => closed.close(r));
  const out = path.join(tmp, 'refused');
  const r = await tool('run', ['--target', `http://127.0.0.1:${port}`, '--model', 'm', '--rate', '50',
    '--requests', '3', '--out', out, '-q']);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  assert.equal(result.outcomes.connect, 3, r.stderr);
  assert.equal(result.streams.no_done, 0);
  assert.equal(result.streams.no_finish, 0);
  assert.equal(result.errors.top[0].outcome, 'connect');
  assert.ok(result.errors.top[0].message.length > 0);
});

// Compressed answers: gzip and deflate (zlib-wrapped and raw), streamed in
// pieces or not, decoded by both engines; a corrupt one is malformed, with why.
const encodings = ['gzip', 'deflate', 'deflate-raw', 'corrupt'];
function compressedServer(res, idx, body, stream) {
  const enc = encodings[idx % encodings.length];
  const headers = { 'content-type': stream ? 'text/event-stream' : 'application/json',
    'content-encoding': enc === 'deflate-raw' ? 'deflate' : (enc === 'corrupt' ? 'gzip' : enc) };
  const z = enc === 'gzip' || enc === 'corrupt' ? zlib.createGzip() : enc === 'deflate' ? zlib.createDeflate() : zlib.createDeflateRaw();
  res.writeHead(200, headers);
  if (enc === 'corrupt') {
    const good = zlib.gzipSync(body);
    good[12] ^= 0xff; // inside the deflate data
    good[13] ^= 0x55;
    res.end(good);
    return;
  }
  z.pipe(res);
  if (!stream) { z.end(body); return; }
  // one flushed piece per event, so the client sees a compressed stream arrive
  const events = body.split(/(?<=\n\n)/);
  let i = 0;
  const next = () => {
    if (i === events.length) { z.end(); return; }
    z.write(events[i++]);
    z.flush(() => setTimeout(next, 5));
  };
  next();
}

const chatBody = JSON.stringify({ id: 'chatcmpl-y', object: 'chat.completion', created: 1, model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hello there' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } });

for (const engine of ['auto', 'curl']) {
  for (const stream of [true, false]) {
    test(`gzip and deflate answers are decoded (${engine} engine, ${stream ? 'streamed' : 'not streamed'})`, async () => {
      await withServer((idx, req, res) => compressedServer(res, idx, stream ? okStream : chatBody, stream), async (target) => {
        const out = path.join(tmp, `gz-${engine}-${stream}`);
        const r = await tool('run', ['--target', target, '--model', 'm', '--rate', '40', '--requests', '8',
          '--http-engine', engine, ...(stream ? [] : ['--no-stream']), '--save-requests', '--out', out, '-q']);
        assert.equal(r.code, 0, r.stderr);
        const reqs = readJsonl(path.join(out, 'requests.jsonl'));
        assert.equal(reqs.length, 8);
        for (const q of reqs) {
          const enc = encodings[q.id % encodings.length];
          if (enc === 'corrupt') {
            assert.equal(q.outcome, 'malformed', JSON.stringify(q));
            assert.match(q.error, /^gzip: invalid compressed data/, JSON.stringify(q));
          } else {
            assert.equal(q.outcome, 'ok', `${enc}: ${JSON.stringify(q)}`);
            assert.equal(q.finish_reason, 'stop');
            if (stream) assert.equal(q.content_chunks, 2, `${enc}: ${JSON.stringify(q)}`);
          }
        }
      });
    });
  }
}
