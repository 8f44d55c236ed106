// The gateway timeout cascade of examples/chaos/gateway-timeout-cascade.yaml,
// shortened: tokenstorm run -> proxy A (http_timeout during the phase) ->
// proxy B -> simulator. A simulator that stops on disconnect leaves no
// orphaned work (the hypothesis holds); `sim --ignore-disconnect` leaves the
// rest of every cut answer, and the probe on proxy B breaks during the phase.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, startServer, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-cascade-'));
const procs = [];
after(async () => {
  for (const p of procs) await p.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function proxy(upstream) {
  const p = await startServer(['proxy', '--upstream', upstream, '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0']);
  procs.push(p);
  for (let i = 0; i < 100 && !/control API on http/.test(p.output); i++) await sleep(20);
  p.api = p.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
  return p;
}

async function cascade(name, simArgs) {
  // about 11 ms per token: 120 tokens take ~1.3 s, the gateway gives up at 500 ms
  const sim = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_fix_ms=10', ...simArgs]);
  procs.push(sim);
  const b = await proxy(sim.base);
  const a = await proxy(b.base);
  const file = path.join(tmp, name + '.yaml');
  fs.writeFileSync(file, JSON.stringify({
    title: name,
    'steady-state-hypothesis': {
      window: '1s', step: '500ms',
      probes: [
        { slo: 'orphaned_tokens<=10', proxy: b.api, name: 'orphans' },
        { slo: 'error_rate<1%', during: 'error_rate<=100%' },
      ],
    },
    method: [{ name: 'gw', at: '2500ms', for: '2500ms', proxy: a.api, fault: { type: 'http_timeout', delay: '500ms' } }],
    load: ['--target', a.base + '/v1', '--rate', '4', '--duration', '9s', '--output-len', 'fixed:120', '--input-len', 'fixed:16', '--seed', '3'],
  }));
  const out = path.join(tmp, name);
  const r = await runBin(['chaos', file, '--out', out, '--quiet'], { timeoutMs: 90000 });
  const doc = JSON.parse(fs.readFileSync(path.join(out, 'experiment.json'), 'utf8'));
  return { r, doc, b };
}

const probe = (w, name) => w.probes.find((p) => p.name === name);

test('a simulator that aborts on disconnect: no orphaned work behind the gateway timeout', { timeout: 120000 }, async () => {
  const { r, doc, b } = await cascade('aborts', []);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const phase = doc.phases[0];
  assert.ok(phase.failed > 0, 'the gateway cut nothing');
  assert.equal(probe(phase, 'orphans').holds, true, JSON.stringify(phase));
  const pb = phase.proxies.find((p) => p.url === b.api);
  assert.ok(pb && pb.orphaned.tokens <= 10, JSON.stringify(phase.proxies));
});

test('sim --ignore-disconnect: the orphaned work shows on proxy B and breaks the hypothesis during the phase', { timeout: 120000 }, async () => {
  const { r, doc, b } = await cascade('ignores', ['--ignore-disconnect']);
  assert.equal(r.code, 0, r.stdout + r.stderr); // deviated: broke during the phase, held after
  assert.equal(doc.verdict, 'deviated', JSON.stringify(doc.phases));
  const phase = doc.phases[0];
  const p = probe(phase, 'orphans');
  assert.equal(p.holds, false);
  assert.ok(p.actual >= 40, JSON.stringify(p)); // several cut answers, ~80 tokens left each
  const pb = phase.proxies.find((x) => x.url === b.api);
  assert.ok(pb && pb.orphaned.tokens === p.actual, JSON.stringify(phase.proxies));
  assert.equal(probe(doc.baseline, 'orphans').holds, true);
});
