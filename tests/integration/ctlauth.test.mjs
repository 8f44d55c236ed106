// Control surfaces (net/ctlauth.h): the proxy's control API and the
// simulator's admin API bind loopback by default, need a bearer token on any
// other address (or --api-insecure, with a warning), and with a token refuse
// every request without it. Traffic goes to 127.0.0.1 only; a 0.0.0.0 bind is
// either refused before it happens or lives for a moment on an ephemeral port.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, startSim, startServer, sleep } from './lib.mjs';

const TOKEN = 'tok-3f9a7c1e';
let sim;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise']);
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
});

// Runs the binary to its end (it is expected to refuse to start).
function refused(args, env = {}) {
  return new Promise((resolve) => {
    const p = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), 10000);
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, out }); });
  });
}

async function startProxy(extra, env) {
  const saved = { ...process.env };
  Object.assign(process.env, env || {});
  try {
    const p = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', ...extra]);
    for (let i = 0; i < 100 && !/control API on http/.test(p.output); i++) await sleep(20);
    const m = p.output.match(/control API on http:\/\/[^:]+:(\d+)/);
    assert.ok(m, p.output);
    p.api = `http://127.0.0.1:${m[1]}`;
    return p;
  } finally {
    process.env = saved;
  }
}

const get = (url, token) => fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });

test('proxy: with --api-token every control call but /health needs the bearer token', async () => {
  const p = await startProxy(['--api', '127.0.0.1:0', '--api-token', TOKEN]);
  try {
    const none = await get(`${p.api}/faults`);
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('www-authenticate'), 'Bearer');
    assert.match((await none.json()).error, /Bearer/);
    assert.equal((await get(`${p.api}/faults`, 'tok-3f9a7c1f')).status, 401); // one byte off
    assert.equal((await get(`${p.api}/faults`, TOKEN.slice(0, -1))).status, 401); // a prefix
    assert.equal((await get(`${p.api}/metrics`)).status, 401);
    const ok = await get(`${p.api}/faults`, TOKEN);
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { faults: [] });
    assert.equal((await get(`${p.api}/health`)).status, 200);
    const add = await fetch(`${p.api}/faults`, {
      method: 'POST', headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ name: 'a', type: 'http_abort', status: 503 }),
    });
    assert.equal(add.status, 201);
    const denied = await fetch(`${p.api}/reset`, { method: 'POST' });
    assert.equal(denied.status, 401);
    assert.equal((await (await get(`${p.api}/faults`, TOKEN)).json()).faults.length, 1);
    assert.doesNotMatch(p.output + p.stderr, new RegExp(TOKEN)); // never logged
  } finally {
    await p.stop('SIGKILL');
  }
});

test('proxy: a routable control API without a token is refused; with a token or --api-insecure it starts', async () => {
  const r = await refused(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', '--api', '0.0.0.0:0']);
  assert.equal(r.code, 2, r.out);
  assert.match(r.out, /0\.0\.0\.0, which other machines can reach, without a token: give --api-token/);
  const bad = await refused(['proxy', '--upstream', sim.base, '--api', '127.0.0.1:0', '--api-token', 'has space']);
  assert.equal(bad.code, 2, bad.out);
  // the token from the environment
  const p = await startProxy(['--api', '0.0.0.0:0'], { TOKENSTORM_API_TOKEN: TOKEN });
  try {
    assert.equal((await get(`${p.api}/faults`)).status, 401);
    assert.equal((await get(`${p.api}/faults`, TOKEN)).status, 200);
  } finally {
    await p.stop('SIGKILL');
  }
  const open = await startProxy(['--api', '0.0.0.0:0', '--api-insecure']);
  try {
    for (let i = 0; i < 50 && !/warning/.test(open.stderr); i++) await sleep(20);
    assert.match(open.stderr, /warning: the control API listens on 0\.0\.0\.0 without a token/);
    assert.equal((await get(`${open.api}/faults`)).status, 200);
  } finally {
    await open.stop('SIGKILL');
  }
});

test('sim: the admin API needs the token; a routable --admin without one is refused', async () => {
  const s = await startSim(['--profile', 'tiny', '--admin', '--api-token', TOKEN]);
  try {
    assert.equal((await get(`${s.base}/admin/faults`)).status, 401);
    assert.equal((await get(`${s.base}/admin/faults`, TOKEN)).status, 200);
    assert.equal((await get(`${s.base}/v1/models`)).status, 200); // the served API is not a control surface
  } finally {
    await s.stop('SIGKILL');
  }
  const r = await refused(['sim', '--listen', '0.0.0.0:0', '--admin']);
  assert.equal(r.code, 2, r.out);
  assert.match(r.out, /admin API \(--admin\) would listen on 0\.0\.0\.0/);
});

// The other listener a run opens, --metrics-listen, changes nothing when
// called: it answers GET and HEAD on /metrics and refuses every other
// method, so it needs no token (docs/OBSERVABILITY.md).
test('run --metrics-listen is read-only: POST, PUT and DELETE get 405', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-ctlauth-'));
  const p = spawn(BIN, ['run', '--target', sim.base, '--rate', '5', '--duration', '4s',
    '--input-len', 'fixed:16', '--output-len', 'fixed:4', '--metrics-listen', '127.0.0.1:0',
    '--metrics-linger', '3s', '-q', '--out', path.join(tmp, 'out')],
  { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  p.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => p.on('exit', resolve));
  const kill = setTimeout(() => p.kill('SIGKILL'), 30000);
  try {
    let port = null;
    for (let i = 0; i < 250 && !port; i++) {
      const m = err.match(/metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/);
      if (m) port = Number(m[1]);
      else await sleep(20);
    }
    assert.ok(port, err);
    const url = `http://127.0.0.1:${port}/metrics`;
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      const r = await fetch(url, { method, body: method === 'DELETE' ? undefined : '{}',
        signal: AbortSignal.timeout(5000) });
      assert.equal(r.status, 405, method);
      assert.equal(r.headers.get('allow'), 'GET, HEAD');
      await r.text();
    }
    const g = await fetch(url, { signal: AbortSignal.timeout(5000) });
    assert.equal(g.status, 200);
    assert.match(await g.text(), /gen_ai_client_operation_duration_seconds|tokenstorm_/);
  } finally {
    await exited;
    clearTimeout(kill);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
