// Orphaned work: a client that gives up mid-stream through `tokenstorm
// proxy`. The proxy passes the hang-up on (a half-close) and counts what its
// upstream still sends: about nothing from the simulator, which stops like
// vLLM, and the rest of the answer from `sim --ignore-disconnect`.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSim, startServer, runBin, sleep } from './lib.mjs';

const procs = [];
after(async () => { for (const p of procs) await p.stop('SIGKILL'); });

async function chainOf(args) {
  // 20 ms per token: 100 tokens take about 2 s
  const sim = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_fix_ms=20', ...args]);
  procs.push(sim);
  const proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0', '--orphan-max', '20s']);
  procs.push(proxy);
  for (let i = 0; i < 100 && !/control API on http/.test(proxy.output); i++) await sleep(20);
  const m = proxy.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/);
  return { sim, proxy, api: m ? m[1] : null };
}

// Streams through the proxy and hangs up after the first bytes plus ms.
async function impatient(base, ms) {
  const ac = new AbortController();
  const res = await fetch(base + '/v1/chat/completions', {
    method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tokenstorm/tiny', stream: true, max_tokens: 100, ignore_eos: true,
      messages: [{ role: 'user', content: 'tell me a long story' }] }),
  });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  await reader.read();
  await sleep(ms);
  ac.abort();
}

async function orphaned(api) {
  // the upstream has at most ~2 s of answer left; wait for it, bounded
  let t;
  for (let i = 0; i < 40; i++) {
    t = (await (await fetch(api + '/chain', { signal: AbortSignal.timeout(5000) })).json()).totals;
    if (t.orphaned.requests > 0 && i >= 15) break;
    await sleep(200);
  }
  return t;
}

test('a simulator that stops on disconnect: no orphaned work', { timeout: 30000 }, async () => {
  const { sim, proxy, api } = await chainOf([]);
  await impatient(proxy.base, 300);
  const t = await orphaned(api);
  assert.ok(t.orphaned.tokens <= 2, JSON.stringify(t.orphaned));
  const m = await (await fetch(sim.base + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
  assert.match(m, /tokenstorm_sim_cancelled_total\{[^}]*\} 1\n/);
});

test('sim --ignore-disconnect: the rest of the answer arrives orphaned, counted in /chain and /metrics', { timeout: 30000 }, async () => {
  const { proxy, api } = await chainOf(['--ignore-disconnect']);
  await impatient(proxy.base, 300);
  const t = await orphaned(api);
  assert.equal(t.orphaned.requests, 1);
  // about 85 of the 100 tokens were still to come; wide margin for a busy machine
  assert.ok(t.orphaned.tokens >= 40 && t.orphaned.tokens <= 100, JSON.stringify(t.orphaned));
  assert.ok(t.orphaned.seconds > 0.5 && t.orphaned.seconds < 15, JSON.stringify(t.orphaned));
  assert.ok(t.orphaned.bytes > 1000);
  const m = await (await fetch(api + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
  assert.match(m, new RegExp(`tokenstorm_proxy_orphaned_tokens_total ${t.orphaned.tokens}\\n`));
  assert.match(m, /tokenstorm_proxy_orphaned_seconds_count 1\n/);
});

test('run --cancel: a share of streams abandoned mid-way, "cancelled" and not errors; the simulator stops each', { timeout: 60000 }, async () => {
  const sim = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_fix_ms=10']);
  procs.push(sim);
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-cancel-'));
  const r = await runBin(['run', '--target', sim.base, '--rate', '20', '--requests', '30', '--output-len', 'fixed:100',
    '--cancel', 'after:uniform:0.2s-0.5s,share:50%', '--out', out, '--force', '--quiet', '--json', '--save-requests'], { timeoutMs: 50000 });
  assert.equal(r.code, 0, r.stderr);
  const res = JSON.parse(r.stdout);
  const lines = fs.readFileSync(path.join(out, 'requests.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const cancelled = lines.filter((l) => l.outcome === 'cancelled').length;
  assert.ok(cancelled >= 5 && cancelled <= 25, `${cancelled} of 30`);
  assert.equal(res.outcomes.cancelled, cancelled);
  assert.equal(res.summary.failed, 0);
  assert.equal(res.summary.completed + cancelled, 30);
  for (const l of lines.filter((x) => x.outcome === 'cancelled')) {
    const ms = l.end_ms - l.start_ms;
    assert.ok(ms >= 190 && ms < 3000, `cancelled after ${ms} ms`);
  }
  const m = await (await fetch(sim.base + '/metrics', { signal: AbortSignal.timeout(5000) })).text();
  assert.match(m, new RegExp(`tokenstorm_sim_cancelled_total\\{[^}]*\\} ${cancelled}\\n`));
  fs.rmSync(out, { recursive: true, force: true });
});
