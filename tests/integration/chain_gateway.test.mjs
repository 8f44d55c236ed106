// Where does retry amplification happen? Two proxies around a real retrying
// gateway: client -> proxy A -> nginx (proxy_next_upstream: up to 3 tries on
// a 503) -> proxy B (503 at random) -> simulator. The client does not retry,
// so A sees one attempt per request; B sees the gateway's retries, which
// nginx's own log counts independently ($upstream_status).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, startServer, sleep } from './lib.mjs';

const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((f) => fs.existsSync(f));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-chain-gw-'));
const procs = [];
let nginx;
after(async () => {
  if (nginx && nginx.exitCode === null) nginx.kill('SIGKILL');
  for (const p of procs) await p.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function proxy(args) {
  const p = await startServer(['proxy', '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0', ...args]);
  procs.push(p);
  for (let i = 0; i < 100 && !/control API on http/.test(p.output); i++) await sleep(20);
  p.api = p.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
  return p;
}

const freePort = () => new Promise((res, rej) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => res(port)); });
  s.on('error', rej);
});

async function startNginx(upstreamPort) {
  const port = await freePort();
  for (const d of ['logs', 'tmp']) fs.mkdirSync(path.join(tmp, d), { recursive: true });
  const conf = path.join(tmp, 'nginx.conf');
  const up = `127.0.0.1:${upstreamPort} max_fails=0`;
  fs.writeFileSync(conf, `
daemon off;
master_process off;
pid ${tmp}/nginx.pid;
error_log ${tmp}/logs/error.log warn;
events { worker_connections 256; }
http {
  client_body_temp_path ${tmp}/tmp/body; proxy_temp_path ${tmp}/tmp/proxy;
  fastcgi_temp_path ${tmp}/tmp/fcgi; uwsgi_temp_path ${tmp}/tmp/uwsgi; scgi_temp_path ${tmp}/tmp/scgi;
  log_format tries '$status "$upstream_status"';
  access_log ${tmp}/logs/access.log tries;
  # the same upstream three times: a retry goes to "the next server", i.e. B again
  upstream model { server ${up}; server ${up}; server ${up}; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://model;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_next_upstream error timeout http_503 non_idempotent;
      proxy_next_upstream_tries 3;
    }
  }
}
`);
  nginx = spawn(NGINX, ['-p', tmp, '-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  nginx.stderr.on('data', (d) => { err += d; });
  for (let i = 0; i < 100; i++) {
    try {
      await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) });
      return `http://127.0.0.1:${port}`;
    } catch { await sleep(50); }
  }
  throw new Error(`nginx did not start: ${err}`);
}

async function chain(p) {
  const r = await fetch(p.api + '/chain', { signal: AbortSignal.timeout(5000) });
  assert.equal(r.status, 200);
  return (await r.json()).totals;
}

test('a retrying gateway between two proxies: A sees 1.0, B sees the gateway\'s retries, as nginx logged them',
  { timeout: 90000, skip: NGINX ? false : 'nginx is not installed (scripts/deps.sh test)' }, async () => {
    const sim = await startSim(['--profile', 'tiny', '--no-noise']);
    procs.push(sim);
    const b = await proxy(['--upstream', sim.base, '--seed', '3']);
    const add = await fetch(b.api + '/faults', {
      method: 'POST', signal: AbortSignal.timeout(5000),
      body: JSON.stringify({ name: 'flaky', type: 'http_abort', status: 503, probability: 0.5 }),
    });
    assert.equal(add.status, 201, await add.text());
    const gw = await startNginx(b.port);
    const a = await proxy(['--upstream', gw]);
    await fetch(b.api + '/chain', { method: 'DELETE', signal: AbortSignal.timeout(5000) }); // nginx's probe
    const n = 40;
    const r = await runBin(['run', '--target', a.base, '--model', 'tokenstorm/tiny', '--requests', String(n),
      '--rate', '40', '--output-len', 'fixed:5', '--quiet', '--json', '--out', path.join(tmp, 'run'), '--force'],
    { timeoutMs: 60000 });
    const s = JSON.parse(r.stdout).summary;
    assert.equal(s.requests, n, r.stderr);
    // nginx's log: per client request, the status of each try
    await sleep(200);
    const lines = fs.readFileSync(path.join(tmp, 'logs', 'access.log'), 'utf8').trim().split('\n')
      .map((l) => l.match(/^(\d+) "(.*)"$/)).filter((m) => m && m[2] !== '-');
    const fromRun = lines.slice(-n);
    assert.equal(fromRun.length, n);
    const tries = fromRun.reduce((sum, m) => sum + m[2].split(', ').length, 0);
    const exhausted = fromRun.filter((m) => m[1] === '503').length;
    assert.equal(s.failed, exhausted); // three 503s in a row reach the client
    const ta = await chain(a);
    const tb = await chain(b);
    // A, in front of the gateway: the client does not retry
    assert.equal(ta.attempts, n);
    assert.equal(ta.distinct, n);
    assert.equal(ta.amplification, 1);
    // B, behind it: every try of nginx, linked to its request by the body hash
    assert.equal(tb.attempts, tries);
    assert.equal(tb.distinct, n);
    assert.equal(tb.retries['503'], tries - n);
    assert.ok(tb.amplification > 1.2 && tb.amplification <= 3, `B: ${tb.amplification}`);
    console.log(`A: ${ta.amplification}, B: ${tb.amplification} (${tb.attempts} attempts for ${n}; ${exhausted} exhausted)`);
  });
