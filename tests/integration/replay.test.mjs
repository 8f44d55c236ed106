// Record and replay: `tokenstorm proxy --record DIR` in front of the
// simulator writes every exchange (secrets and --redact fields hidden, the
// directory bounded); `tokenstorm sim --replay DIR` serves the recording as
// a stand-in, and the same run against it gets the same answers, tokens and
// timing within a tolerance.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { controlApi, runBin, sleep, startSim, startServer } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-replay-'));
const procs = [];
let recorded = null; // the first test's recording, for run --replay
after(async () => {
  for (const p of procs) await p.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const runArgs = (target, out) => ['run', '--target', target, '--model', 'tokenstorm/tiny', '--requests', '8', '--rate', '20',
  '--output-len', 'uniform:10-40', '--seed', '5', '--api-key', 'sk-test-very-secret', '--quiet', '--json',
  '--save-requests', '--out', out, '--force'];

function readRecording(dir) {
  return fs.readdirSync(dir).filter((f) => /^rec-\d{6}\.jsonl$/.test(f)).sort()
    .flatMap((f) => fs.readFileSync(path.join(dir, f), 'utf8').trim().split('\n').filter(Boolean));
}

test('record against the simulator, replay with sim --replay: same answers and tokens, timing within tolerance', { timeout: 90000 }, async () => {
  const sim = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_fix_ms=5']);
  procs.push(sim);
  const rec = path.join(tmp, 'rec');
  const proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', '--no-api',
    '--record', rec, '--redact', '/messages/*/content']);
  procs.push(proxy);
  const a = await runBin(runArgs(proxy.base, path.join(tmp, 'a')), { timeoutMs: 60000 });
  assert.equal(a.code, 0, a.stderr);
  await proxy.stop('SIGTERM'); // flushes the recording
  const lines = readRecording(rec);
  const text = lines.join('\n');
  assert.ok(!text.includes('sk-test-very-secret'), 'the API key reached the recording');
  const chats = lines.map((l) => JSON.parse(l)).filter((x) => x.path === '/v1/chat/completions');
  assert.equal(chats.length, 8);
  for (const x of chats) {
    assert.equal(x.v, 1);
    assert.equal(x.headers.Authorization ?? x.headers.authorization, '[redacted]');
    assert.equal(x.body.messages[0].content, '[redacted]');
    assert.match(x.body_hash, /^[0-9a-f]{16}$/);
    assert.equal(x.status, 200);
    assert.ok(x.events.length > 10 && x.events.at(-1)[1] === '[DONE]');
    for (let i = 1; i < x.events.length; i++) assert.ok(x.events[i][0] >= x.events[i - 1][0]);
  }

  recorded = rec;
  const replay = await startSim(['--replay', rec]);
  procs.push(replay);
  const b = await runBin(runArgs(replay.base, path.join(tmp, 'b')), { timeoutMs: 60000 });
  assert.equal(b.code, 0, b.stderr);
  const ra = JSON.parse(a.stdout).summary;
  const rb = JSON.parse(b.stdout).summary;
  assert.equal(rb.completed, 8);
  assert.equal(rb.total_output_tokens, ra.total_output_tokens);
  // timing: each answer's end to end within 50% + 100 ms of the recorded run's
  const reqs = (d) => fs.readFileSync(path.join(tmp, d, 'requests.jsonl'), 'utf8').trim().split('\n')
    .map((l) => JSON.parse(l)).sort((x, y) => x.id - y.id);
  const qa = reqs('a');
  const qb = reqs('b');
  for (let i = 0; i < qa.length; i++) {
    const ea = qa[i].end_ms - qa[i].start_ms;
    const eb = qb[i].end_ms - qb[i].start_ms;
    assert.equal(qb[i].output_tokens, qa[i].output_tokens, `request ${i}`);
    assert.ok(Math.abs(eb - ea) <= 0.5 * ea + 100, `request ${i}: ${ea} ms recorded, ${eb} ms replayed`);
  }
  // a request that matches nothing: an OpenAI-style 404
  const res = await fetch(replay.base + '/v1/embeddings', { method: 'POST', body: '{"input":"x"}', signal: AbortSignal.timeout(5000) });
  assert.equal(res.status, 404);
  assert.match(await res.text(), /no recorded exchange/);
});

test('--record-file-max rotates and --record-max deletes the oldest files', { timeout: 60000 }, async () => {
  const sim = await startSim(['--profile', 'tiny', '--no-noise']);
  procs.push(sim);
  const rec = path.join(tmp, 'rot');
  const proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0', '--no-api',
    '--record', rec, '--record-file-max', '4K', '--record-max', '16K']);
  procs.push(proxy);
  const r = await runBin(['run', '--target', proxy.base, '--requests', '30', '--rate', '50', '--output-len', 'fixed:8',
    '--quiet', '--out', path.join(tmp, 'rotrun'), '--force'], { timeoutMs: 50000 });
  assert.equal(r.code, 0, r.stderr);
  await proxy.stop('SIGTERM');
  const files = fs.readdirSync(rec).filter((f) => /^rec-\d{6}\.jsonl$/.test(f)).sort();
  assert.ok(files.length >= 2, files.join(' '));
  assert.notEqual(files[0], 'rec-000001.jsonl'); // the oldest went
  const total = files.reduce((s, f) => s + fs.statSync(path.join(rec, f)).size, 0);
  assert.ok(total <= 16 * 1024 + 4096, `${total} bytes`);
  for (const f of files) { // whole lines only
    for (const l of fs.readFileSync(path.join(rec, f), 'utf8').trim().split('\n')) JSON.parse(l);
  }
  // bad options are usage errors
  const bad = await runBin(['proxy', '--upstream', sim.base, '--redact', 'messages'], { timeoutMs: 10000 });
  assert.equal(bad.code, 2);
});

test('run --replay: the recorded requests at their recorded times (--speed, --loop), each answer scored against the recorded one', { timeout: 90000 }, async () => {
  assert.ok(recorded, 'the recording test ran first');
  const chats = readRecording(recorded).map((l) => JSON.parse(l)).filter((x) => x.path === '/v1/chat/completions')
    .sort((a, b) => a.offset_ms - b.offset_ms); // lines are written as exchanges end
  const offsets = chats.map((x) => x.offset_ms - chats[0].offset_ms);
  const replay = await startSim(['--replay', recorded]);
  procs.push(replay);
  const out = path.join(tmp, 'rr');
  // The recording's message contents are redacted, so the stand-in cannot
  // match a replayed body by its hash and serves the model's exchanges in
  // recorded order: one worker sends them in that order (two could swap two
  // close ones, and the answers would then differ from the references).
  const r = await runBin(['run', '--target', replay.base, '--replay', recorded, '--workers', '1', '--quiet', '--json', '--save-requests',
    '--out', out, '--force', '--slo', 'rouge_l>0.99'], { timeoutMs: 60000 });
  const brief = () => {
    try {
      const d = JSON.parse(r.stdout);
      return JSON.stringify({ slo: d.slo, summary: { completed: d.summary.completed, failed: d.summary.failed }, quality: d.quality, errors: d.errors });
    } catch { return r.stdout.slice(0, 3000); }
  };
  assert.equal(r.code, 0, `exit ${r.code}: ${r.stderr} ${brief()}`);
  const res = JSON.parse(r.stdout);
  assert.equal(res.summary.completed, 8);
  // the stand-in gives the recorded answers back: similarity 1
  assert.equal(res.quality.with_reference, 8);
  assert.ok(res.quality.rouge_l.mean > 0.999, JSON.stringify(res.quality));
  assert.equal(res.quality.exact_match_rate, 1);
  const reqs = fs.readFileSync(path.join(out, 'requests.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
    .sort((a, b) => a.intended_ms - b.intended_ms);
  for (let i = 0; i < reqs.length; i++) {
    assert.ok(Math.abs(reqs[i].intended_ms - reqs[0].intended_ms - offsets[i]) < 1, `request ${i}: ${reqs[i].intended_ms - reqs[0].intended_ms} vs ${offsets[i]}`);
  }
  // against the live simulator the answers differ: the regression is measured
  const sim = await startSim(['--profile', 'tiny', '--no-noise']);
  procs.push(sim);
  const live = await runBin(['run', '--target', sim.base, '--replay', recorded, '--quiet', '--json', '--out',
    path.join(tmp, 'rl'), '--force', '--speed', '2', '--loop', '--duration', '1s'], { timeoutMs: 60000 });
  assert.equal(live.code, 0, live.stderr);
  const lr = JSON.parse(live.stdout);
  assert.ok(lr.summary.completed > 8, `${lr.summary.completed}: --loop repeats the recording`);
  assert.ok(lr.quality.rouge_l.mean < 0.9, JSON.stringify(lr.quality));
  const bad = await runBin(['run', '--replay', recorded, '--rate', '5'], { timeoutMs: 20000 });
  assert.equal(bad.code, 2);
});

test('--record: a stream too big for one line keeps its first events and says body_too_large; the line stays readable', { timeout: 60000 }, async () => {
  const http = await import('node:http');
  const big = 'x'.repeat(900 << 10); // 20 events of 900 KiB do not fit one 16-MiB line
  const up = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let i = 0; i < 20; i++) res.write(`data: {"i":${i},"pad":"${big}"}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise((r) => up.listen(0, '127.0.0.1', r));
  const rec = path.join(tmp, 'recbig');
  const proxy = await startServer(['proxy', '--upstream', `http://127.0.0.1:${up.address().port}`,
    '--listen', '127.0.0.1:0', '--no-api', '--record', rec]);
  procs.push(proxy);
  try {
    const res = await fetch(proxy.base + '/v1/chat/completions', { method: 'POST',
      headers: { 'content-type': 'application/json' }, body: '{"model":"m","stream":true,"messages":[]}',
      signal: AbortSignal.timeout(30000) });
    const body = await res.text();
    assert.equal((body.match(/"pad"/g) || []).length, 20); // the client got all of it
  } finally {
    await proxy.stop('SIGTERM');
    up.close();
  }
  const lines = readRecording(rec);
  assert.equal(lines.length, 1);
  assert.ok(lines[0].length < 16 << 20, `a line of ${lines[0].length} bytes`);
  const x = JSON.parse(lines[0]);
  assert.equal(x.outcome, 'body_too_large');
  assert.ok(x.events.length >= 10 && x.events.length < 20, `${x.events.length} events`);
  x.events.forEach((e, i) => assert.equal(JSON.parse(e[1]).i, i)); // the first ones, no holes
});

test('--record-memory-max: the streams recorded at once share one budget; past it an exchange keeps its first events (recorder_full), and the budget comes back', { timeout: 60000 }, async () => {
  const http = await import('node:http');
  const pad = 'y'.repeat(1500);
  const N = 30; // events of ~1.6 KB as written: one stream (~48 KB) fits 64 KB, four at once do not
  const open = []; // the responses being streamed, written in lock step
  let want = 4;
  let tick = null;
  const up = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      open.push({ res, i: 0 });
      if (open.length < want || tick) return; // the four start together
      tick = setInterval(() => {
        for (const o of open) o.res.write(`data: {"i":${o.i++},"pad":"${pad}"}\n\n`);
        for (const o of open.filter((x) => x.i === N)) o.res.end('data: [DONE]\n\n');
        for (let k = open.length - 1; k >= 0; k--) if (open[k].i === N) open.splice(k, 1);
        if (!open.length) { clearInterval(tick); tick = null; }
      }, 10);
    });
  });
  await new Promise((r) => up.listen(0, '127.0.0.1', r));
  const rec = path.join(tmp, 'recmem');
  const proxy = await startServer(['proxy', '--upstream', `http://127.0.0.1:${up.address().port}`,
    '--listen', '127.0.0.1:0', '--api', '127.0.0.1:0', '--record', rec, '--record-memory-max', '64K']);
  procs.push(proxy);
  const api = await controlApi(proxy);
  const ask = async (prompt = '') => {
    const res = await fetch(proxy.base + '/v1/chat/completions', { method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"model":"m","stream":true,"messages":[{"role":"user","content":"${prompt}"}]}`,
      signal: AbortSignal.timeout(30000) });
    return (await res.text()).match(/"pad"/g).length;
  };
  let metrics;
  try {
    assert.deepEqual(await Promise.all([ask(), ask(), ask(), ask()]), [N, N, N, N]); // clients got everything
    want = 1;
    assert.equal(await ask(), N); // alone, after the four were written
    assert.equal(await ask('p'.repeat(70 << 10)), N); // its request alone is past the budget: not recorded
    for (let i = 0; i < 50 && !/^tokenstorm_proxy_recorded_total 5$/m.test(metrics || ''); i++) {
      metrics = await (await fetch(api + '/metrics')).text();
      if (i) await sleep(20);
    }
  } finally {
    await proxy.stop('SIGTERM');
    up.close();
  }
  assert.match(metrics, /^tokenstorm_proxy_recorded_total 5$/m);
  assert.match(metrics, /^tokenstorm_proxy_record_memory_bytes 0$/m); // all given back
  assert.match(metrics, /^tokenstorm_proxy_record_cut_total\{reason="line"\} 0$/m);
  assert.match(metrics, /^tokenstorm_proxy_record_dropped_total\{reason="memory"\} 1$/m);
  assert.match(metrics, /^tokenstorm_proxy_record_dropped_total\{reason="disk"\} 0$/m);
  const cuts = Number(metrics.match(/^tokenstorm_proxy_record_cut_total\{reason="memory"\} (\d+)$/m)[1]);
  const xs = readRecording(rec).map((l) => JSON.parse(l)).sort((a, b) => a.id - b.id);
  assert.equal(xs.length, 5);
  const full = xs.filter((x) => x.outcome === 'recorder_full');
  assert.ok(full.length >= 1 && full.length <= 4, xs.map((x) => x.outcome).join(' '));
  assert.equal(full.length, cuts);
  let held = 0;
  for (const x of xs.slice(0, 4)) {
    const evs = x.events.filter((e) => e[1] !== '[DONE]');
    evs.forEach((e, i) => assert.equal(JSON.parse(e[1]).i, i)); // the first ones, no holes
    assert.equal(evs.length < N, x.outcome === 'recorder_full');
    held += evs.length;
  }
  assert.ok(held * 1580 <= 64 * 1024, `${held} events held at once`); // each costs >= 1,516 + 64 bytes
  const last = xs[4];
  assert.equal(last.outcome, 'ok'); // the budget came back
  assert.equal(last.events.length, N + 1);
  const said = new RegExp(`\\b${cuts} with their later events left out past --record-memory-max`);
  for (let i = 0; i < 50 && !said.test(proxy.stderr); i++) await sleep(20); // the pipe may lag the exit
  assert.match(proxy.stderr, said); // the proxy says so when it stops
});
