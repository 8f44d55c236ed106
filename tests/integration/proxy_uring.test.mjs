// The proxy's send path to clients: io_uring (batched sends, the default
// where the kernel allows it) and write(2) (--no-io-uring,
// TOKENSTORM_IO_URING=0, or the fallback). meson runs this file twice: as
// is, and with TOKENSTORM_IO_URING=0 in the environment (with proxy and
// proxy_ws tests), so both paths keep every byte in order through partial
// sends, slow readers, clients that vanish mid-write and SIGTERM.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { runBin, startServer, sleep } from './lib.mjs';

const FORCED_OFF = /^(0|off|no)$/i.test(process.env.TOKENSTORM_IO_URING || '');
const servers = [];
after(() => { for (const s of servers) s.close(); });

async function startProxy(upstream, extra = []) {
  const p = await startServer(['proxy', '--upstream', upstream, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--grace', '1s', ...extra]);
  for (let i = 0; i < 100 && !/sends to clients/.test(p.output); i++) await sleep(20);
  const m = p.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/);
  assert.ok(m, p.output);
  p.api = m[1];
  p.uring = /sends to clients through io_uring/.test(p.output);
  return p;
}

async function metric(px, name) {
  const text = await (await fetch(px.api + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  assert.ok(m, `${name} missing from /metrics`);
  return Number(m[1]);
}

// An upstream whose handler is fn(req, res); resolves with its base URL.
async function upstream(fn) {
  const srv = http.createServer(fn);
  servers.push(srv);
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${srv.address().port}`;
}

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

// GET url; resolves with the whole body, rejects when the response is cut
// (or after timeoutMs).
function get(url, { agent, timeoutMs = 30000, onResponse } = {}) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { req.destroy(); reject(new Error('timeout ' + url)); }, timeoutMs);
    const done = (f, v) => { clearTimeout(timer); f(v); };
    const req = http.get(url, { agent }, (res) => {
      const parts = [];
      let ended = false;
      if (onResponse) onResponse(res);
      res.on('data', (d) => parts.push(d));
      res.on('end', () => { ended = true; done(resolve, Buffer.concat(parts)); });
      res.on('close', () => { if (!ended) done(reject, new Error('aborted ' + url)); });
    });
    req.on('error', (e) => done(reject, e));
  });
}

test('how the proxy sends is said once at start, in /health and in /metrics', async () => {
  const up = await upstream((req, res) => res.end('ok'));
  const px = await startProxy(up);
  const forced = await startProxy(up, ['--no-io-uring']);
  try {
    assert.equal(px.output.match(/sends to clients/g).length, 1, px.output);
    const h = await (await fetch(px.api + '/health')).json();
    assert.equal(h.status, 'ok');
    assert.equal(h.io_uring, px.uring);
    assert.equal(await metric(px, 'tokenstorm_proxy_io_uring'), px.uring ? 1 : 0);
    if (FORCED_OFF) {
      assert.equal(px.uring, false);
      assert.match(px.output, /with write\(2\): io_uring off \(--no-io-uring\)/);
      assert.equal(h.io_uring_off, '--no-io-uring');
    } else if (!px.uring) {
      // the fallback where the kernel refuses io_uring: the reason is given
      assert.match(px.output, /with write\(2\): io_uring off \([^)]+\)/);
      assert.ok(h.io_uring_off.length > 0);
    }
    assert.match(forced.output, /sends to clients with write\(2\): io_uring off \(--no-io-uring\)/);
    const hf = await (await fetch(forced.api + '/health')).json();
    assert.deepEqual(hf, { status: 'ok', io_uring: false, io_uring_off: '--no-io-uring' });
    assert.equal(await metric(forced, 'tokenstorm_proxy_io_uring'), 0);
  } finally {
    await px.stop('SIGKILL');
    await forced.stop('SIGKILL');
  }
  const bad = await runBin(['proxy', '--upstream', up, '--listen', '127.0.0.1:0', '--no-api'],
    { env: { ...process.env, TOKENSTORM_IO_URING: 'maybe' }, timeoutMs: 10000 });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /TOKENSTORM_IO_URING: expected 0\/off or 1\/on, got 'maybe'/);
});

test('200 concurrent streams in lock-step bursts: every byte in order, sends batched', async () => {
  // Like an inference server's engine step: one event to every stream, then
  // the next step. Event sizes vary (1 B to 3 KiB) so sends cross blocks.
  const STREAMS = 200;
  const STEPS = 60;
  const events = Array.from({ length: STREAMS }, (_, s) => Array.from({ length: STEPS }, (_, i) =>
    Buffer.from(`data: ${s}.${i} ${crypto.randomBytes((s * 31 + i * 17) % 2300).toString('base64')}\n\n`)));
  const waiting = [];
  const up = await upstream((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    waiting.push({ s: Number(new URL(req.url, 'http://x').searchParams.get('s')), res });
  });
  const px = await startProxy(up);
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  try {
    const bodies = Array.from({ length: STREAMS }, (_, s) => get(`${px.base}/v1/x?s=${s}`, { agent }));
    for (let i = 0; i < 500 && waiting.length < STREAMS; i++) await sleep(10);
    assert.equal(waiting.length, STREAMS, 'every stream reached the upstream');
    // the last STOPPED steps reach the proxy while it is stopped (SIGSTOP), so
    // one loop pass finds all 200 streams' events: that is where batching
    // shows, whatever the machine's load
    const STOPPED = 5;
    let before;
    for (let i = 0; i < STEPS; i++) {
      const stop = i >= STEPS - STOPPED;
      if (stop && i === STEPS - STOPPED) {
        await sleep(100);
        before = [await metric(px, 'tokenstorm_proxy_io_uring_sends_total'),
          await metric(px, 'tokenstorm_proxy_io_uring_submits_total')];
      }
      if (stop) px.proc.kill('SIGSTOP');
      for (const w of waiting) w.res.write(events[w.s][i]);
      await sleep(stop ? 30 : 2);
      if (stop) px.proc.kill('SIGCONT');
      if (stop) await sleep(30);
    }
    for (const w of waiting) w.res.end();
    const got = await Promise.all(bodies);
    for (let s = 0; s < STREAMS; s++)
      assert.equal(sha(got[s]), sha(Buffer.concat(events[s])), `stream ${s}: bytes differ`);
    const sends = await metric(px, 'tokenstorm_proxy_io_uring_sends_total');
    const submits = await metric(px, 'tokenstorm_proxy_io_uring_submits_total');
    if (px.uring) {
      // without batching a system call would carry one send (submits ==
      // sends); a pass of 200 events goes in batches of up to 32 (a stream
      // whose previous send is still in flight sends its events later, in
      // one: hence the margins)
      const ds = sends - before[0];
      const dc = submits - before[1];
      assert.ok(ds >= STREAMS * STOPPED / 2, `sends ${ds} in the stopped steps`);
      assert.ok(ds >= 4 * dc, `stopped steps: ${ds} sends in ${dc} system calls: not batched`);
    } else {
      assert.equal(sends, 0);
      assert.equal(submits, 0);
    }
  } finally {
    agent.destroy();
    await px.stop('SIGTERM');
  }
  assert.equal(px.exited.code, 0, px.stderr);
});

test('a slow reader: partial sends and backpressure keep every byte of 8 MiB', async () => {
  const blob = crypto.randomBytes(8 << 20);
  const up = await upstream(async (req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    for (let off = 0; off < blob.length; off += 65536)
      if (!res.write(blob.subarray(off, off + 65536))) await new Promise((r) => res.once('drain', r));
    res.end();
  });
  const px = await startProxy(up);
  try {
    // the client reads nothing for a while, then slowly: the kernel's buffer
    // fills, sends wait for room and are taken in pieces
    const body = await get(px.base + '/blob', {
      onResponse: (res) => {
        res.pause();
        setTimeout(() => res.resume(), 800);
      },
    });
    assert.equal(body.length, blob.length);
    assert.equal(sha(body), sha(blob));
  } finally {
    await px.stop('SIGTERM');
  }
  assert.equal(px.exited.code, 0, px.stderr);
});

test('clients that vanish mid-write, and SIGTERM with a client that never reads', async () => {
  const chunk = crypto.randomBytes(65536);
  const up = await upstream(async (req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.on('close', () => { res.done = true; });
    // up to 64 MiB, stopping when the proxy lets go of the stream
    for (let i = 0; i < 1024 && !res.done; i++)
      if (!res.write(chunk)) await Promise.race([new Promise((r) => res.once('drain', r)), sleep(200)]);
    res.end();
  });
  const px = await startProxy(up);
  const stuck = [];
  try {
    // three clients that read nothing, then vanish with the proxy's sends waiting for room
    for (let round = 0; round < 3; round++) {
      const s = net.connect(px.port, '127.0.0.1');
      await new Promise((r, j) => { s.once('connect', r); s.once('error', j); });
      s.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\n');
      s.pause();
      await sleep(300);
      if (round === 2) s.resetAndDestroy(); else s.destroy();
    }
    // the proxy still relays, and lets the vanished streams go
    const ok = await get(px.base + '/small', { onResponse: (res) => setTimeout(() => res.destroy(), 50) })
      .catch((e) => e);
    assert.ok(ok instanceof Buffer || /aborted/i.test(String(ok)), String(ok));
    const h = await (await fetch(px.api + '/health', { signal: AbortSignal.timeout(5000) })).json();
    assert.equal(h.status, 'ok');
    let inflight = -1;
    for (let i = 0; i < 100 && inflight !== 0; i++) {
      inflight = await metric(px, 'tokenstorm_proxy_requests_in_flight');
      if (inflight) await sleep(50);
    }
    assert.equal(inflight, 0, 'the vanished clients\' requests are finished');
    // one that stays connected and never reads: SIGTERM still ends the proxy
    // within its 1 s grace (the send waiting for room is cancelled)
    const s = net.connect(px.port, '127.0.0.1');
    stuck.push(s);
    await new Promise((r, j) => { s.once('connect', r); s.once('error', j); });
    s.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\n');
    s.pause();
    await sleep(500);
    const t0 = Date.now();
    const r = await px.stop('SIGTERM', 15000);
    assert.equal(r.code, 0, px.stderr);
    assert.ok(Date.now() - t0 < 10000, `exit took ${Date.now() - t0} ms`);
  } finally {
    for (const s of stuck) s.destroy();
    await px.stop('SIGKILL');
  }
});
