// `tokenstorm run --endpoint realtime` against misbehaving Realtime servers
// built on the `ws` package: what the client counts when events come after
// response.done, out of order, with a bad close code, cut, malformed, or binary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { WebSocketServer } from 'ws';
import { runBin } from '../integration/lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-rt-integrity-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

const ev = (type, extra = {}) => JSON.stringify({ type, event_id: 'e', ...extra });
const created = (id) => ev('response.created', { response: { id, status: 'in_progress' } });
const delta = (id, d) => ev('response.output_text.delta', { response_id: id, item_id: 'i', delta: d });
const done = (id, n, status = 'completed') => ev('response.done', {
  response: { id, status, usage: { input_tokens: 7, output_tokens: n, total_tokens: 7 + n } } });

// A server whose answer to response.create is script(ws); runs `tokenstorm run` against it.
async function runAgainst(script, requests = 2, extra = []) {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.on('listening', r));
  wss.on('connection', (ws) => {
    ws.send(ev('session.created', { session: { id: 'sess_1' } }));
    ws.on('message', (m) => { if (JSON.parse(m.toString()).type === 'response.create') script(ws); });
  });
  const out = path.join(tmp, String(Math.random()).slice(2));
  const r = await runBin(['run', '--target', `http://127.0.0.1:${wss.address().port}`, '--model', 'm',
    '--endpoint', 'realtime', '--requests', String(requests), '--concurrency', '1', '--output-len', 'fixed:3',
    '--save-requests', '--out', out, '-q', ...extra], { timeoutMs: 30000 });
  await new Promise((res) => wss.close(res));
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  const reqs = fs.readFileSync(path.join(out, 'requests.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
  return { r, result, reqs };
}

test('a well-behaved server: ok, tokens from usage, a clean close', async () => {
  const { r, result, reqs } = await runAgainst((ws) => {
    ws.send(created('r1')); ws.send(delta('r1', 'a')); ws.send(delta('r1', 'b')); ws.send(delta('r1', 'c'));
    ws.send(done('r1', 3));
  });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(result.outcomes.ok, 2);
  assert.equal(result.summary.total_output_tokens, 6);
  assert.equal(reqs[0].content_chunks, 3);
  assert.equal(result.streams.bad_close, 0);
});

test('a delta after response.done is counted (after_done)', async () => {
  const { result } = await runAgainst((ws) => {
    ws.send(created('r1')); ws.send(delta('r1', 'a')); ws.send(done('r1', 1)); ws.send(delta('r1', 'late'));
  });
  // the client closes at response.done; a delta already on the wire is still read
  assert.ok(result.streams.after_done >= 1, JSON.stringify(result.streams));
});

test('a delta before response.created is out of order', async () => {
  const { result } = await runAgainst((ws) => {
    ws.send(delta('r1', 'a')); ws.send(created('r1')); ws.send(delta('r1', 'b')); ws.send(done('r1', 2));
  });
  assert.equal(result.streams.out_of_order, 2);
  assert.equal(result.outcomes.ok, 2);
});

test('a close with 1011 mid-answer: truncated, bad_close, the code in the error', async () => {
  const { r, result, reqs } = await runAgainst((ws) => {
    ws.send(created('r1')); ws.send(delta('r1', 'a')); ws.close(1011, 'boom');
  });
  assert.equal(r.code, 3);
  assert.equal(result.outcomes.truncated, 2);
  assert.equal(result.streams.bad_close, 2);
  assert.equal(result.streams.no_done, 2);
  assert.match(reqs[0].error, /closed with 1011 before response.done/);
});

test('a connection cut without a close frame mid-answer is truncated', async () => {
  const { result, reqs } = await runAgainst((ws) => {
    ws.send(created('r1')); ws.send(delta('r1', 'a'));
    setTimeout(() => ws.terminate(), 20);
  });
  assert.equal(result.outcomes.truncated, 2);
  assert.match(reqs[0].error, /without a close frame/);
});

test('a failed response and an error event are stream errors', async () => {
  const { result, reqs } = await runAgainst((ws) => {
    ws.send(ev('error', { error: { type: 'server_error', code: 'overloaded', message: 'too busy' } }));
  });
  assert.equal(result.outcomes.stream_error, 2);
  assert.match(reqs[0].error, /too busy/);
});

test('a malformed event is counted as malformed', async () => {
  const { result } = await runAgainst((ws) => {
    ws.send(created('r1')); ws.send('{not json'); ws.send(delta('r1', 'a')); ws.send(done('r1', 1));
  });
  assert.equal(result.outcomes.malformed, 2);
});

test('a binary message is malformed, named as binary; the text events around it still count', async () => {
  const { result, reqs } = await runAgainst((ws) => {
    ws.send(created('r1')); ws.send(Buffer.from(delta('r1', 'x')), { binary: true });
    ws.send(delta('r1', 'a')); ws.send(done('r1', 1));
  });
  assert.equal(result.outcomes.malformed, 2);
  assert.equal(reqs[0].content_chunks, 1); // the JSON inside the binary frame is not taken
  assert.match(reqs[0].error, /a binary message \(\d+ bytes\), not a text event/);
});

// llm/sign.h's chain: MAC = HMAC-SHA256(key, PREV || be64(SEQ) || DATA), id SEQ.PREV.MAC in hex
function signer(key) {
  let prev = Buffer.alloc(32);
  let seq = 0n;
  return (data) => {
    const be = Buffer.alloc(8);
    be.writeBigUInt64BE(seq);
    const mac = crypto.createHmac('sha256', key).update(Buffer.concat([prev, be, Buffer.from(data)])).digest();
    const id = `${seq}.${prev.toString('hex')}.${mac.toString('hex')}`;
    prev = mac;
    seq += 1n;
    return id;
  };
}

test('signed deltas: a dropped and a repeated delta are seen by --integrity hmac', async () => {
  const { r, result } = await runAgainst((ws) => {
    const sign = signer('k3y');
    const d = ['a', 'b', 'c', 'd'].map((t) => JSON.stringify({ type: 'response.output_text.delta', response_id: 'r1', delta: t, sig: sign(t) }));
    ws.send(created('r1'));
    ws.send(d[0]); ws.send(d[1]); ws.send(d[1]); ws.send(d[3]); // c dropped, b twice
    ws.send(done('r1', 4));
  }, 1, ['--integrity', 'hmac', '--integrity-key', 'k3y']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(result.integrity.streams_violated, 1);
  assert.equal(result.integrity.chunks_ok, 2); // a, b; d arrives after a gap (counted missing)
  assert.equal(result.integrity.missing, 1);
  assert.equal(result.integrity.duplicates, 1);
});

// --ws-frames: a gateway with its own JSON frames, described by a spec file.
async function gateway(script) {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => wss.on('listening', r));
  const seen = [];
  wss.on('connection', (ws, req) => {
    ws.on('message', (m) => { const f = JSON.parse(m.toString()); seen.push({ f, auth: req.headers.authorization }); script(ws, f); });
  });
  return { wss, seen, url: `ws://127.0.0.1:${wss.address().port}/gen?x=1` };
}

async function runFrames(gw, spec, extra = []) {
  const file = path.join(tmp, `spec-${Math.random().toString(36).slice(2)}.json`);
  fs.writeFileSync(file, typeof spec === 'string' ? spec : JSON.stringify({ url: gw.url, ...spec }));
  const out = path.join(tmp, String(Math.random()).slice(2));
  const r = await runBin(['run', '--ws-frames', file, '--target', 'http://127.0.0.1:1', '--model', 'gw-model',
    '--api-key', 'sk-gw', '--requests', '2', '--concurrency', '1', '--output-len', 'fixed:3', '--input-len', 'fixed:8',
    '--save-requests', '--out', out, '-q', ...extra], { timeoutMs: 30000 });
  let result = null;
  try { result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8')); } catch { /* refused */ }
  return { r, result };
}

test('--ws-frames: the request from the template, deltas, end and usage by pointer', async () => {
  const gw = await gateway((ws, f) => {
    ws.send(JSON.stringify({ t: 'x' })); ws.send(JSON.stringify({ t: 'y' }));
    ws.send(JSON.stringify({ t: 'z', last: true, meta: { n: 3 } }));
  });
  try {
    const { r, result } = await runFrames(gw, {
      request: { op: 'gen', text: '{{prompt}}', max: '{{max_tokens}}', id: '{{request_id}}', model: '{{model}}', keep: ['{{model}}', 7] },
      delta: '/t', end: '/last', usage: '/meta/n',
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(result.outcomes.ok, 2);
    assert.equal(result.summary.total_output_tokens, 6);
    assert.equal(result.tokens.content_chunks, 6);
    const f = gw.seen[0].f;
    assert.equal(f.op, 'gen');
    assert.equal(typeof f.text, 'string');
    assert.ok(f.text.length > 0);
    assert.equal(f.max, 3);
    assert.equal(f.model, 'gw-model');
    assert.deepEqual(f.keep, ['gw-model', 7]);
    assert.match(f.id, /^ts-[0-9a-f]+-\d+$/);
    assert.equal(gw.seen[0].auth, 'Bearer sk-gw');
  } finally { gw.wss.close(); }
});

test('--ws-frames: end by value, an error frame, a cut before the end, a bad spec', async () => {
  let gw = await gateway((ws) => {
    ws.send(JSON.stringify({ type: 'tok', v: 'a' })); ws.send(JSON.stringify({ type: 'end' }));
  });
  try {
    const { r, result } = await runFrames(gw, { request: {}, delta: '/v', end: { pointer: '/type', equals: 'end' } });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(result.outcomes.ok, 2);
    assert.equal(result.summary.total_output_tokens, 2); // no usage: the deltas are counted
  } finally { gw.wss.close(); }
  gw = await gateway((ws) => { ws.send(JSON.stringify({ err: { message: 'quota gone' } })); });
  try {
    const { result } = await runFrames(gw, { request: {}, delta: '/v', end: '/done', error: '/err' });
    assert.equal(result.outcomes.stream_error, 2);
  } finally { gw.wss.close(); }
  gw = await gateway((ws) => { ws.send(JSON.stringify({ v: 'a' })); setTimeout(() => ws.close(1000), 10); });
  try {
    const { result } = await runFrames(gw, { request: {}, delta: '/v', end: '/done' });
    assert.equal(result.outcomes.truncated, 2);
  } finally { gw.wss.close(); }
  const { r } = await runFrames(null, '{"url": "ws://127.0.0.1:1/x", "request": {}, "delta": "v", "end": "/e"}');
  assert.equal(r.code, 2);
  assert.match(r.stderr, /'delta' must be a JSON pointer/);
  const bad = await runFrames(null, '{"url": "ws://x", \n "request": {},}');
  assert.equal(bad.r.code, 2);
  assert.match(bad.r.stderr, /spec-.*\.json:2:\d+/);
});

// wss://: a TLS WebSocket server (node's https + ws) with a certificate made here.
test('wss://: the chain checked against SSL_CERT_FILE, refused when untrusted, --insecure skips it', async () => {
  const { execFileSync } = await import('node:child_process');
  const https = await import('node:https');
  const key = path.join(tmp, 'key.pem');
  const cert = path.join(tmp, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
    '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  const server = https.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (ws) => {
    ws.send(ev('session.created', { session: { id: 's' } }));
    ws.on('message', () => { ws.send(created('r1')); ws.send(delta('r1', 'a')); ws.send(delta('r1', 'b')); ws.send(done('r1', 2)); });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const target = `https://127.0.0.1:${server.address().port}`;
  const go = async (extra, env) => {
    const out = path.join(tmp, String(Math.random()).slice(2));
    const r = await runBin(['run', '--target', target, '--model', 'm', '--endpoint', 'realtime', '--requests', '2',
      '--concurrency', '1', '--save-requests', '--out', out, '-q', ...extra], { timeoutMs: 30000, env: { ...process.env, ...env } });
    const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
    const reqs = fs.readFileSync(path.join(out, 'requests.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    return { r, result, reqs };
  };
  try {
    const trusted = await go([], { SSL_CERT_FILE: cert });
    assert.equal(trusted.r.code, 0, trusted.r.stderr);
    assert.equal(trusted.result.outcomes.ok, 2);
    assert.match(trusted.result.run.target, /^wss:\/\/127\.0\.0\.1:\d+\/v1\/realtime\?model=m$/);
    assert.ok(trusted.reqs[0].tls_ms > 0 && trusted.reqs[0].tls_ms <= trusted.reqs[0].ttfb_ms);
    const untrusted = await go([], { SSL_CERT_FILE: '/nonexistent' });
    assert.equal(untrusted.r.code, 3);
    assert.equal(untrusted.result.outcomes.tls, 2);
    assert.match(untrusted.reqs[0].error, /certificate/);
    const insecure = await go(['--insecure'], { SSL_CERT_FILE: '/nonexistent' });
    assert.equal(insecure.r.code, 0, insecure.r.stderr);
    assert.equal(insecure.result.outcomes.ok, 2);
  } finally {
    wss.close();
    server.close();
  }
});
