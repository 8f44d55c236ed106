// Model discovery (issue 14): when GET /v1/models fails, `run` says what
// happened (nothing listening, TLS against a plain-HTTP port, an HTTP error
// status with the server's message, an answer that is no OpenAI model list)
// instead of "(give --model)", which invites a run that can only fail. Every
// server is a small node server on 127.0.0.1 port 0; every process is
// bounded in time.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { runBin } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-discovery-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// A port on 127.0.0.1 with nothing listening: bound, noted, closed.
function deadPort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// Runs fn(port) against a server answering every request with (status, type, body).
async function withServer(status, type, body, fn) {
  const srv = http.createServer((req, res) => {
    res.writeHead(status, type ? { 'content-type': type } : {});
    res.end(body);
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  try {
    return await fn(srv.address().port);
  } finally {
    srv.closeAllConnections();
    await new Promise((r) => srv.close(r));
  }
}

// `run` without --model against target: refused before any load, with why.
async function discover(target) {
  const out = path.join(tmp, 'out');
  const r = await runBin(['run', '--target', target, '--requests', '1', '-q', '--out', out, '--force'],
    { timeoutMs: 30000 });
  assert.equal(r.code, 3, r.stderr);
  assert.ok(!fs.existsSync(path.join(out, 'result.json')));
  assert.doesNotMatch(r.stderr, /\(give --model\)/, r.stderr);
  return r.stderr;
}

test('nothing listening', async () => {
  const port = await deadPort();
  const e = await discover(`http://127.0.0.1:${port}`);
  assert.match(e, new RegExp(`cannot list models at http://127\\.0\\.0\\.1:${port}/v1/models: .*nothing is listening there`));
  assert.match(e, /is the server running, and is --target its address and port\?/);
});

test('TLS to a plain-HTTP port', async () => {
  await withServer(200, 'application/json', '{"data":[{"id":"m"}]}', async (port) => {
    const e = await discover(`https://127.0.0.1:${port}/v1`);
    assert.match(e, /the TLS handshake failed: if the port speaks plain HTTP, use http:\/\//);
  });
});

test('an HTTP error status, with the server\'s message and what to do', async () => {
  const key = '{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}';
  await withServer(401, 'application/json', key, async (port) => {
    const e = await discover(`http://127.0.0.1:${port}`);
    assert.match(e, /HTTP 401 \(Incorrect API key provided \(type: invalid_request_error, code: invalid_api_key\)\)/);
    assert.match(e, /give its API key \(--api-key or \$OPENAI_API_KEY\)/);
  });
  await withServer(404, 'text/plain', 'Not Found', async (port) => {
    const e = await discover(`http://127.0.0.1:${port}`);
    assert.match(e, /HTTP 404 \(Not Found\): no model list at this URL: check that --target is the server's root/);
  });
  await withServer(502, null, '', async (port) => {
    const e = await discover(`http://127.0.0.1:${port}`);
    assert.match(e, /HTTP 502 \(empty body\): the server failed/);
  });
});

test('not an OpenAI-compatible server: a body that is not JSON, or JSON with no data[]', async () => {
  await withServer(200, 'text/html', '<html><body>It works!</body></html>', async (port) => {
    const e = await discover(`http://127.0.0.1:${port}`);
    assert.match(e, /the answer is not JSON \(text\/html: <html><body>It works!<\/body><\/html>\): not an OpenAI-compatible server at this URL/);
  });
  await withServer(200, 'application/json', '{"models":["a"]}', async (port) => {
    const e = await discover(`http://127.0.0.1:${port}`);
    assert.match(e, /the answer has no "data" list: not an OpenAI-compatible model list/);
  });
  await withServer(200, 'application/json', '{"object":"list","data":[]}', async (port) => {
    const e = await discover(`http://127.0.0.1:${port}`);
    assert.match(e, /the server lists no model \("data" is empty\)/);
  });
});
