// `tokenstorm chaos suggest`: the fault-mode catalogue ranked against the
// fixture app's topology (tests/fixtures/topology/ragapp, scanned with
// python3), written as experiment files; every one passes `chaos --check`,
// and the top one runs end to end against the simulator behind the proxy and
// gives a verdict. Then a user's catalogue that replaces a mode, and one
// that is wrong.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, startServer, sleep } from './lib.mjs';

const app = new URL('../fixtures/topology/ragapp', import.meta.url).pathname;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-suggest-'));
const topoJson = path.join(tmp, 'topo', 'topology.json');
const procs = [];
let sim;
let proxy;

before(async () => {
  const env = { ...process.env };
  delete env.LLM_BASE_URL;
  delete env.WEATHER_URL;
  const r = await runBin(['topology', '--source', app, '--out', path.join(tmp, 'topo')], { env });
  assert.equal(r.code, 0, r.stderr);
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--admin', '--seed', '5']);
  procs.push(sim);
  proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--seed', '3']);
  procs.push(proxy);
  for (let i = 0; i < 100 && !/control API on http/.test(proxy.output); i++) await sleep(20);
  proxy.api = proxy.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/)[1];
});
after(async () => {
  for (const p of procs) await p.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const suggestArgs = (out, extra = []) => ['chaos', 'suggest', '--topology', topoJson, '--out', out,
  '--target', `${proxy.base}/v1`, '--proxy-api', proxy.api, '--sim-admin', sim.base,
  '--at', '2s', '--for', '3s', '--recover', '4s', '--rate', '4', ...extra];

test('suggestions are ranked, explained, spread over the layers, and all pass --check', async () => {
  const out = path.join(tmp, 'sug');
  const r = await runBin(suggestArgs(out, ['--max', '6']));
  assert.equal(r.code, 0, r.stderr);
  const list = JSON.parse(fs.readFileSync(path.join(out, 'suggestions.json'), 'utf8'));
  assert.equal(list.length, 6);
  // the top one: a streaming path with a blocking call in it and a client with no timeout
  assert.equal(list[0].id, 'stream-stall');
  assert.match(list[0].reason, /answer_stream \(app\/rag\.py:20\) is a streaming path but calls http:\/\/127\.0\.0\.1:9400\/audit synchronously/);
  assert.match(list[1].reason, /up to 8 calls past llm/);
  for (const s of list) {
    assert.ok(s.score > 0 && s.score <= 1 && s.risk >= 0.1 && s.risk <= 0.9, JSON.stringify(s));
    assert.ok(s.reason.length > 0);
  }
  // the first three cover the three fault layers
  assert.deepEqual(new Set(list.slice(0, 3).map((s) => s.layer)), new Set(['service', 'middleware', 'infrastructure']));
  // modes that match nothing in this app are not suggested (no traced errors, ...)
  for (const s of list) {
    const file = path.join(out, s.file);
    const text = fs.readFileSync(file, 'utf8');
    assert.match(text, new RegExp(`^# Fault mode: ${s.id} `, 'm'));
    assert.match(text, /^# Why: /m);
    const c = await runBin(['chaos', '--check', file]);
    assert.equal(c.code, 0, `${s.file}: ${c.stdout}${c.stderr}`);
    assert.match(c.stdout, /ok: \d+ probes, 1 phases, faults end at 5\.0 s/);
  }
  assert.match(r.stdout, /^1\. stream-stall +0\.90 +service/m);
});

test('the top suggestion runs end to end against the simulator behind the proxy', async () => {
  const out = path.join(tmp, 'sug');
  const top = fs.readdirSync(out).filter((f) => f.startsWith('01-'))[0];
  const dir = path.join(tmp, 'run-top');
  const r = await runBin(['chaos', path.join(out, top), '--out', dir], { timeoutMs: 90000 });
  assert.ok(r.code === 0 || r.code === 1, r.stdout + r.stderr);
  const e = JSON.parse(fs.readFileSync(path.join(dir, 'experiment.json'), 'utf8'));
  assert.ok(['steady', 'deviated', 'recovered', 'not_recovered', 'unsteady'].includes(e.verdict), e.verdict);
  assert.equal(e.phases.length, 1);
  assert.equal(e.phases[0].name, 'stream-stall');
  assert.match(r.stdout, /verdict: /);
  // the stall was really injected by the proxy: streams during the phase took >= 3 s
  const reqs = fs.readFileSync(path.join(dir, 'run', 'requests.jsonl'), 'utf8').trim().split('\n').map(JSON.parse);
  const slow = reqs.filter((q) => q.e2el_ms >= 2900);
  assert.ok(slow.length > 0, `no request shows the 3 s stall (${reqs.length} requests)`);
});

test('a user catalogue replaces a mode; a wrong one is refused with its position', async () => {
  const cat = path.join(tmp, 'mine.yaml');
  fs.writeFileSync(cat, [
    'version: 1',
    'modes:',
    '  - id: stream-stall',
    '    title: Our streams never stall (we checked)',
    '    layer: service',
    '    hits: model',
    '    risk: 0.1',
    '    when: [trait:streaming]',
    '    via: proxy',
    '    fault: {type: sse_stall, after_events: 3, delay: 1s}',
    '    for: 5s',
    '    probes: [{slo: "error_rate<1%"}]',
    '  - id: gateway-slowloris',
    '    title: The gateway answers slowly',
    '    layer: middleware',
    '    hits: gateway',
    '    risk: 0.9',
    '    when: [kind:entry]',
    '    via: proxy',
    '    fault: {type: tcp_bandwidth, rate: 2K}',
    '    for: 5s',
    '    probes: [{slo: "error_rate<1%"}]',
    '',
  ].join('\n'));
  const out = path.join(tmp, 'sug-mine');
  const r = await runBin(suggestArgs(out, ['--catalogue', cat, '--format', 'json']));
  assert.equal(r.code, 0, r.stderr);
  const list = JSON.parse(r.stdout);
  assert.equal(list[0].id, 'gateway-slowloris');
  assert.ok(!list.slice(0, 3).some((s) => s.id === 'stream-stall'), JSON.stringify(list.map((s) => s.id)));
  for (const s of list) {
    const c = await runBin(['chaos', '--check', path.join(out, s.file)]);
    assert.equal(c.code, 0, c.stdout + c.stderr);
  }

  const bad = path.join(tmp, 'bad.yaml');
  fs.writeFileSync(bad, fs.readFileSync(cat, 'utf8').replace('risk: 0.9', 'risk: 2').replace('delay: 1s', 'dealy: 1s'));
  const b = await runBin(suggestArgs(path.join(tmp, 'x'), ['--catalogue', bad]));
  assert.equal(b.code, 2);
  assert.match(b.stderr, /bad\.yaml:10:13: mode 'stream-stall': fault: .*dealy/);
  fs.writeFileSync(bad, fs.readFileSync(cat, 'utf8').replace('risk: 0.9', 'risk: 2'));
  const b2 = await runBin(suggestArgs(path.join(tmp, 'x'), ['--catalogue', bad]));
  assert.equal(b2.code, 2);
  assert.match(b2.stderr, /bad\.yaml:17:11: .*risk/);
  const b3 = await runBin(['chaos', 'suggest', '--topology', cat]);
  assert.equal(b3.code, 2);
});

test("a run's result alone: its 429s put the rate-limit mode first, aimed at its target", async () => {
  const post = await fetch(`${sim.base}/admin/faults`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'error_rate', rate: 0.5, status: 429 }),
  });
  assert.equal(post.status, 201);
  const runDir = path.join(tmp, 'run-429');
  let r;
  try {
    r = await runBin(['run', '--target', `${sim.base}/v1`, '--requests', '20', '--rate', '40',
      '--output-len', 'fixed:8', '--quiet', '--out', runDir]);
  } finally {
    await fetch(`${sim.base}/admin/faults`, { method: 'DELETE' });
  }
  assert.ok(r.code === 0 || r.code === 1, r.stderr);
  const out = path.join(tmp, 'sug-result');
  const s = await runBin(['chaos', 'suggest', '--result', runDir, '--out', out, '--format', 'json']);
  assert.equal(s.code, 0, s.stderr);
  const list = JSON.parse(s.stdout);
  assert.equal(list[0].id, 'model-rate-limited');
  assert.match(list[0].reason, /the run saw \d+ HTTP 429 answers/);
  // only what a result can show: no mode that needs the code's topology alone
  assert.ok(!list.some((x) => x.id === 'embedding-drift' || x.id === 'empty-retrieval'), JSON.stringify(list.map((x) => x.id)));
  for (const x of list) {
    const text = fs.readFileSync(path.join(out, x.file), 'utf8');
    assert.ok(text.includes(`load: ["--target", "${sim.base}/v1"`), text);
    const c = await runBin(['chaos', '--check', path.join(out, x.file)]);
    assert.equal(c.code, 0, c.stdout + c.stderr);
  }
  const none = await runBin(['chaos', 'suggest']);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /give --topology FILE, --result DIR or both/);
});
