// `tokenstorm chaos` end to end against `tokenstorm sim --admin` behind a
// `tokenstorm proxy`, the simulator's admin API, and `chaos --check` on every
// example of examples/chaos/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, startServer, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-chaos-'));
const examples = new URL('../../examples/chaos/', import.meta.url).pathname;
const procs = [];

async function startProxy(upstream) {
  const p = await startServer(['proxy', '--upstream', upstream, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--seed', '3']);
  for (let i = 0; i < 100 && !/control API on http/.test(p.output); i++) await sleep(20);
  const m = p.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/);
  assert.ok(m, p.output);
  p.api = m[1];
  procs.push(p);
  return p;
}

async function startAdminSim(extra = []) {
  const s = await startSim(['--profile', 'tiny', '--no-noise', '--admin', '--seed', '5', ...extra]);
  procs.push(s);
  return s;
}

after(async () => {
  for (const p of procs) await p.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const call = async (method, url, body) => {
  const res = await fetch(url, { method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(10000) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, json };
};

const chat = (base, extra = {}) => call('POST', base + '/v1/chat/completions',
  { model: 'tokenstorm/tiny', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }], ...extra });

// An experiment file (JSON is YAML) in tmp.
function experiment(name, doc) {
  const file = path.join(tmp, name + '.yaml');
  fs.writeFileSync(file, JSON.stringify(doc, null, 1));
  return file;
}

const load = (target, seconds) => ['--target', target + '/v1', '--rate', '20', '--duration', `${seconds}s`,
  '--input-len', 'fixed:32', '--output-len', 'fixed:8', '--seed', '2'];

test('sim admin API: off unless --admin', async () => {
  const s = await startSim(['--profile', 'tiny', '--no-noise']);
  procs.push(s);
  assert.equal((await call('GET', s.base + '/admin/faults')).status, 404);
  assert.equal((await call('POST', s.base + '/admin/faults', { type: 'stall', for: '1s' })).status, 404);
  await s.stop('SIGKILL');
});

test('sim admin API: error_rate, cold_start, stall, kv_shrink, list, delete', async () => {
  const s = await startAdminSim();
  const admin = s.base + '/admin/faults';
  // bad specs
  let r = await call('POST', admin, { type: 'stal', for: '1s' });
  assert.equal(r.status, 400);
  assert.match(r.json.error, /did you mean 'stall'/);
  r = await call('POST', admin, { type: 'kv_shrink', to_tokens: 100 });
  assert.equal(r.status, 400);
  assert.match(r.json.error, /to_tokens must lie in 32768 \(max_model_len\)/);
  assert.equal((await call('DELETE', admin + '/stall')).status, 404);
  assert.deepEqual((await call('GET', admin)).json, { faults: [] });

  // error_rate 1 with status 500: every generation answered with an OpenAI-style 500
  r = await call('POST', admin, { type: 'error_rate', rate: 1, status: 500 });
  assert.equal(r.status, 201);
  for (let i = 0; i < 5; i++) {
    const c = await chat(s.base);
    assert.equal(c.status, 500);
    assert.equal(c.json.error.type, 'server_error');
  }
  assert.equal((await call('GET', s.base + '/health')).status, 200); // health is not an error target
  r = await call('GET', admin);
  assert.equal(r.json.faults.length, 1);
  assert.equal(r.json.faults[0].type, 'error_rate');
  assert.equal(r.json.faults[0].injected, 5);
  // rate 0.5: about half (seeded; bounds wide enough for any seed)
  await call('POST', admin, { type: 'error_rate', rate: 0.5 });
  let errs = 0;
  for (let i = 0; i < 40; i++) errs += (await chat(s.base)).status === 500 ? 1 : 0;
  assert.ok(errs >= 8 && errs <= 32, `errors ${errs}/40`);
  assert.equal((await call('DELETE', admin + '/error_rate')).status, 204);
  assert.equal((await chat(s.base)).status, 200);

  // cold start: 503 with Retry-After until ready, /health too
  r = await call('POST', admin, { type: 'cold_start', for: '1500ms' });
  assert.equal(r.status, 201);
  let c = await chat(s.base);
  assert.equal(c.status, 503);
  assert.equal(c.json.error.code, 'model_loading');
  assert.equal(c.headers.get('retry-after'), '2');
  assert.equal((await call('GET', s.base + '/health')).status, 503);
  await sleep(1600);
  assert.equal((await chat(s.base)).status, 200);
  assert.deepEqual((await call('GET', admin)).json, { faults: [] }); // ended by itself

  // stall: a request waits for the stall; DELETE ends it early
  await call('POST', admin, { type: 'stall', for: '800ms' });
  let t0 = Date.now();
  c = await chat(s.base);
  assert.equal(c.status, 200);
  let took = Date.now() - t0;
  assert.ok(took >= 700 && took < 3000, `stalled ${took} ms`);
  await call('POST', admin, { type: 'stall', for: '20s' });
  t0 = Date.now();
  setTimeout(() => call('DELETE', admin + '/stall'), 300);
  c = await chat(s.base);
  took = Date.now() - t0;
  assert.equal(c.status, 200);
  assert.ok(took >= 250 && took < 3000, `stall ended early after ${took} ms`);

  // kv_shrink: the capacity falls over time in 100 ms steps, DELETE restores it
  r = await call('POST', admin, { type: 'kv_shrink', to_tokens: 40000, over: '1s' });
  assert.equal(r.status, 201);
  assert.equal(r.json.kv_tokens, 1048576);
  await sleep(500);
  r = await call('GET', admin + '/kv_shrink');
  assert.ok(r.json.kv_tokens < 1048576 * 0.8 && r.json.kv_tokens > 40000, `kv ${r.json.kv_tokens}`);
  await sleep(800);
  r = await call('GET', admin + '/kv_shrink');
  assert.equal(r.json.kv_tokens, 40000);
  assert.ok(r.json.injected >= 9, `steps ${r.json.injected}`);
  assert.equal((await chat(s.base)).status, 200);
  assert.equal((await call('DELETE', admin)).status, 204);
  assert.deepEqual((await call('GET', admin)).json, { faults: [] });
  await s.stop('SIGKILL');
});

test('chaos --check accepts every example and rejects a bad file', async () => {
  const files = fs.readdirSync(examples).filter((f) => f.endsWith('.yaml'));
  assert.ok(files.length >= 8, files.join(' '));
  for (const f of files) {
    const r = await runBin(['chaos', '--check', path.join(examples, f)]);
    assert.equal(r.code, 0, `${f}: ${r.stderr}`);
    assert.match(r.stdout, /ok: \d+ probes, \d+ phases/);
  }
  const bad = path.join(tmp, 'bad.yaml');
  fs.writeFileSync(bad, 'title: x\nsteady-state-hypothesis:\n  probes: [{slo: "ttft.p95<1s"}]\nmethd: []\n');
  const r = await runBin(['chaos', '--check', bad]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /bad\.yaml:4:1: unknown key 'methd' in the experiment \(did you mean 'method'\?\)/);
});

test('experiments end to end: an SLO-breaking fault deviates, a harmless one is steady, a stall deviates', async () => {
  const [simA, simB, simC] = await Promise.all([startAdminSim(), startAdminSim(), startAdminSim()]);
  const [proxyA, proxyB] = await Promise.all([startProxy(simA.base), startProxy(simB.base)]);
  const hypothesis = { probes: [{ slo: 'error_rate<1%', during: 'error_rate<20%' }, { slo: 'ttft.p95<500ms' }] };
  const breaking = experiment('breaking', {
    title: '503 for 3 s', 'steady-state-hypothesis': hypothesis,
    method: [{ name: 'abort', at: '3s', for: '3s', proxy: proxyA.api,
      fault: { type: 'http_abort', status: 503, probability: 1 } }],
    load: load(proxyA.base, 10),
  });
  const harmless = experiment('harmless', {
    title: '1 ms of latency', 'steady-state-hypothesis': hypothesis,
    method: [{ name: 'lag', at: '3s', for: '3s', proxy: proxyB.api,
      fault: { type: 'http_delay_request', delay: '1ms' } }],
    load: load(proxyB.base, 10),
  });
  const stall = experiment('stall', {
    title: 'engine stall', 'steady-state-hypothesis': { probes: [{ slo: 'ttft.p95<500ms' }] },
    method: [{ name: 'stall', at: '3s', for: '2s', sim: simC.base, fault: { type: 'stall' } }],
    load: load(simC.base, 10),
  });
  const dirs = ['breaking', 'harmless', 'stall'].map((n) => path.join(tmp, 'out-' + n));
  const [rb, rh, rs] = await Promise.all([
    runBin(['chaos', breaking, '--out', dirs[0]]),
    runBin(['chaos', harmless, '--out', dirs[1]]),
    runBin(['chaos', stall, '--out', dirs[2]]),
  ]);

  // the 503s break the hypothesis beyond its tolerance; it holds again after
  assert.equal(rb.code, 0, rb.stdout + rb.stderr);
  assert.match(rb.stdout, /verdict: deviated .*recovered after \d+\.\d s/);
  const eb = JSON.parse(fs.readFileSync(path.join(dirs[0], 'experiment.json'), 'utf8'));
  assert.equal(eb.schema, 'tokenstorm.chaos/1');
  assert.equal(eb.verdict, 'deviated');
  assert.equal(eb.deviated, true);
  assert.equal(eb.steady_before, true);
  assert.equal(typeof eb.recovery_s, 'number');
  assert.ok(eb.recovery_s >= 0 && eb.recovery_s <= 2, `recovery ${eb.recovery_s}`);
  assert.equal(eb.exit_code, 0);
  const ph = eb.phases[0];
  assert.equal(ph.name, 'abort');
  assert.equal(ph.holds, false);
  assert.ok(ph.requests >= 40, `requests during the fault ${ph.requests}`);
  assert.equal(ph.failed, ph.requests); // p=1: every one of them
  assert.equal(ph.probes[0].slo, 'error_rate<20%');
  assert.equal(ph.probes[0].actual, 1);
  // The phase is scheduled 3 s after the experiment's start; the run's time 0
  // comes later by the child's start-up (0.4 s seen on a busy 2-core machine),
  // so the window is 3 s wide and starts at most ~1.5 s early, never late.
  const inWindow = (a, b) => Math.abs(b - a - 3) < 0.3 && a > 1.5 && a < 3.3;
  assert.ok(inWindow(ph.from_s, ph.to_s), `${ph.from_s}..${ph.to_s}`);
  // the fault windows are in the run's result.json for the report
  const res = JSON.parse(fs.readFileSync(path.join(dirs[0], 'run', 'result.json'), 'utf8'));
  assert.equal(res.faults.length, 1);
  assert.equal(res.faults[0].name, 'abort');
  assert.ok(inWindow(res.faults[0].start_s, res.faults[0].end_s),
    `${res.faults[0].start_s}..${res.faults[0].end_s}`);
  assert.ok(fs.existsSync(path.join(dirs[0], 'run', 'requests.jsonl')));
  // the rollbacks left nothing behind
  assert.deepEqual((await call('GET', proxyA.api + '/faults')).json, { faults: [] });
  assert.equal(eb.rollbacks[0].ok, true);

  // 1 ms of latency: the hypothesis holds throughout
  assert.equal(rh.code, 0, rh.stdout + rh.stderr);
  const eh = JSON.parse(fs.readFileSync(path.join(dirs[1], 'experiment.json'), 'utf8'));
  assert.equal(eh.verdict, 'steady', JSON.stringify(eh.phases));
  assert.equal(eh.deviated, false);
  assert.equal(eh.recovery_s, 0);
  assert.match(rh.stdout, /verdict: steady/);
  // the proxy's own forward delay during the experiment: its streamed pieces, timed
  assert.equal(eh.proxies.length, 1);
  assert.equal(eh.proxies[0].url, proxyB.api);
  const fd = eh.proxies[0].forward_delay;
  assert.ok(fd.pieces >= 100, JSON.stringify(eh.proxies)); // ~10 req/s of streamed answers
  assert.ok(fd.p50_s > 0 && fd.p50_s <= fd.p99_s, JSON.stringify(fd));
  assert.match(rh.stdout, /proxy http:\/\/127\.0\.0\.1:\d+: its own delay per forwarded piece p50 [\d.]+ [um]s, p99 /);
  // an experiment on the simulator alone watches no proxy
  assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dirs[2], 'experiment.json'), 'utf8')).proxies, []);

  // a 2 s engine stall through the simulator's admin API: TTFT breaks, then recovers
  assert.equal(rs.code, 0, rs.stdout + rs.stderr);
  const es = JSON.parse(fs.readFileSync(path.join(dirs[2], 'experiment.json'), 'utf8'));
  assert.equal(es.verdict, 'deviated', JSON.stringify(es.phases));
  assert.ok(es.phases[0].probes[0].actual > 1000, `ttft p95 during the stall ${es.phases[0].probes[0].actual}`);
  assert.equal(typeof es.recovery_s, 'number');
  assert.deepEqual((await call('GET', simC.base + '/admin/faults')).json, { faults: [] });
});

test('rollbacks run on Ctrl-C: the faults are gone, exit 130', async () => {
  const sim = await startAdminSim();
  const proxy = await startProxy(sim.base);
  const file = experiment('interrupted', {
    title: 'interrupted', 'steady-state-hypothesis': { probes: [{ slo: 'error_rate<1%' }] },
    method: [
      { name: 'slow', at: '1s', for: '30s', proxy: proxy.api, fault: { type: 'http_delay_request', delay: '1ms' } },
      { name: 'errors', at: '1s', for: '30s', sim: sim.base, fault: { type: 'error_rate', rate: 0.1 } },
    ],
    load: load(proxy.base, 40),
  });
  const out = path.join(tmp, 'out-interrupted');
  let during = null;
  const r = await runBin(['chaos', file, '--out', out], {
    onStart: (proc) => setTimeout(async () => {
      during = [(await call('GET', proxy.api + '/faults')).json.faults.length,
        (await call('GET', sim.base + '/admin/faults')).json.faults.length];
      proc.kill('SIGINT');
    }, 2500),
  });
  assert.deepEqual(during, [1, 1]); // both faults were in place
  assert.equal(r.code, 130, r.stdout + r.stderr);
  assert.deepEqual((await call('GET', proxy.api + '/faults')).json, { faults: [] });
  assert.deepEqual((await call('GET', sim.base + '/admin/faults')).json, { faults: [] });
  const e = JSON.parse(fs.readFileSync(path.join(out, 'experiment.json'), 'utf8'));
  assert.equal(e.interrupted, true);
  assert.equal(e.exit_code, 130);
  assert.equal(e.rollbacks.length, 2);
  assert.ok(e.rollbacks.every((x) => x.ok));
});

// SIGTERM (a CI cancelling the job, `kill`, systemd) and SIGINT end the
// experiment the same way: the load stopped with its results so far, the
// faults rolled back, experiment.json written as a partial record marked
// interrupted, and the exit code a CI can tell apart (143, 130).
for (const [sig, code] of [['SIGTERM', 143], ['SIGINT', 130]]) {
  test(`chaos: ${sig} exits ${code} with a partial experiment.json marked interrupted`, async () => {
    const sim = await startAdminSim();
    const file = experiment(`sig-${code}`, {
      title: `stopped by ${sig}`, hypothesis: { probes: [{ slo: 'error_rate<50%' }] },
      method: [{ name: 'errors', at: '2s', for: '30s', sim: sim.base,
        fault: { type: 'error_rate', rate: 0.1 } }],
      load: load(sim.base, 40),
    });
    const out = path.join(tmp, `out-sig-${code}`);
    let during = null;
    const r = await runBin(['chaos', file, '--out', out], {
      onStart: (proc) => setTimeout(async () => {
        during = (await call('GET', sim.base + '/admin/faults')).json.faults.length;
        proc.kill(sig);
      }, 3500),
    });
    assert.equal(during, 1); // the fault was in place when the signal came
    assert.equal(r.signal, null, r.stderr);
    assert.equal(r.code, code, r.stdout + r.stderr);
    assert.deepEqual((await call('GET', sim.base + '/admin/faults')).json, { faults: [] });
    const e = JSON.parse(fs.readFileSync(path.join(out, 'experiment.json'), 'utf8'));
    assert.equal(e.interrupted, true);
    assert.equal(e.interrupted_by, sig);
    assert.equal(e.exit_code, code);
    assert.equal(e.verdict, null);
    assert.equal(e.rollbacks.length, 1);
    assert.ok(e.rollbacks.every((x) => x.ok), JSON.stringify(e.rollbacks));
    // partial: the load's results so far, judged as far as they go
    const run = JSON.parse(fs.readFileSync(path.join(out, 'run', 'result.json'), 'utf8'));
    assert.ok(run.summary.requests > 0, JSON.stringify(run.summary));
    assert.equal(run.run.interrupted_by, sig, 'the load was stopped by the same signal');
    assert.ok(e.baseline, JSON.stringify(e).slice(0, 1000));
    await sim.stop('SIGKILL');
  });
}
