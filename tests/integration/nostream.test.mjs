// A non-streamed request has no TTFT, TTFC, ITL or TPOT (issue 14): they are
// absent (null) in requests.jsonl, result.json, the console and the HTML
// report, never the whole latency or 0 ms; SLOs and goodput thresholds on
// them are usage errors at start when the run streams nothing. And the load
// and workload options that a scenario's classes set for themselves are
// refused with a scenario file instead of being ignored. Every target is the
// simulator on 127.0.0.1; every process is bounded in time.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-nostream-'));
let sim;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise']);
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const ts = runBin;

const readJson = (f) => JSON.parse(fs.readFileSync(f, 'utf8'));
const readJsonl = (f) => fs.readFileSync(f, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const load = () => ['--target', sim.base, '--rate', '20', '--requests', '8', '--duration', '5s'];

test('--no-stream: TTFT, TTFC, ITL and TPOT are absent everywhere, E2EL and tokens are measured', async () => {
  const out = path.join(tmp, 'plain');
  const r = await ts(['run', ...load(), '--no-stream', '--output-len', 'fixed:16', '--save-requests',
    '--slo', 'e2el.p99<60s', '--out', out]);
  assert.equal(r.code, 0, r.stderr);
  // requests.jsonl: the points a stream has are null, not the end of the body
  const reqs = readJsonl(path.join(out, 'requests.jsonl'));
  assert.equal(reqs.length, 8);
  for (const q of reqs) {
    assert.equal(q.outcome, 'ok', JSON.stringify(q));
    assert.equal(q.stream, false);
    for (const k of ['first_chunk_ms', 'first_token_ms', 'last_chunk_ms', 'ttft_ms', 'ttfc_ms', 'tpot_ms', 'itl_mean_ms']) {
      assert.equal(q[k], null, `${k}: ${JSON.stringify(q)}`);
    }
    assert.ok(q.e2el_ms > 0, JSON.stringify(q));
    assert.equal(q.output_tokens, 16);
  }
  // result.json: no samples, null statistics (0 ms would read as a perfect server)
  const doc = readJson(path.join(out, 'result.json'));
  for (const m of ['ttft', 'ttfc', 'itl', 'tpot']) {
    assert.equal(doc.latency[m].count, 0, m);
    for (const k of ['mean', 'p50', 'p99', 'max']) assert.equal(doc.latency[m][k], null, `${m}.${k}`);
    for (const k of [`mean_${m}_ms`, `median_${m}_ms`, `p99_${m}_ms`]) assert.equal(doc.summary[k], null, k);
  }
  assert.equal(doc.latency.e2el.count, 8);
  assert.ok(doc.summary.p99_e2el_ms > 0);
  assert.equal(doc.summary.total_output_tokens, 8 * 16);
  assert.ok(doc.summary.output_throughput > 0);
  assert.equal(doc.summary.max_output_tokens_per_s, null); // counts chunks: there are none
  // the console: no TTFT/TPOT rows of zeros, and it says why
  assert.doesNotMatch(r.stdout, /^(TTFT|TTFC|ITL|TPOT)\s/m, r.stdout);
  assert.match(r.stdout, /^E2EL\s+\d/m);
  assert.match(r.stdout, /no request was streamed: .*no TTFT, TTFC, ITL or TPOT/);
  assert.doesNotMatch(r.stdout, /peak 0 tok\/s/);
  // the HTML report: the TTFT and TPOT rows have no values
  const html = path.join(tmp, 'plain.html');
  const h = await ts(['report', '--format', 'html', '-o', html, out]);
  assert.equal(h.code, 0, h.stderr);
  const page = fs.readFileSync(html, 'utf8');
  for (const label of ['TTFT', 'ITL', 'TPOT']) {
    assert.match(page, new RegExp(`<tr><td>${label}</td><td>0</td>(<td>-</td>){7}</tr>`), label);
  }
  assert.match(page, /<tr><td>E2EL<\/td><td>8<\/td><td>\d/);
});

test('a streamed run still measures them (the same target and load)', async () => {
  const out = path.join(tmp, 'streamed');
  const r = await ts(['run', ...load(), '--output-len', 'fixed:16', '--save-requests', '-q', '--out', out]);
  assert.equal(r.code, 0, r.stderr);
  const doc = readJson(path.join(out, 'result.json'));
  for (const m of ['ttft', 'ttfc', 'itl', 'tpot']) assert.ok(doc.latency[m].count > 0, m);
  assert.ok(doc.summary.p99_tpot_ms > 0);
  for (const q of readJsonl(path.join(out, 'requests.jsonl'))) assert.ok(q.ttft_ms > 0 && q.tpot_ms > 0);
});

test('SLOs and goodput thresholds on stream-only metrics are refused when nothing streams', async () => {
  const refused = [
    [['--no-stream', '--slo', 'tpot.p99<1ms'], /--slo 'tpot\.p99<1ms': tpot needs streamed requests.*\(--no-stream\)/],
    [['--no-stream', '--slo', 'ttft.p99<2s'], /ttft needs streamed requests/],
    [['--no-stream', '--slo', 'ttfc.p50<2s'], /ttfc needs streamed requests/],
    [['--no-stream', '--slo', 'itl.p99<50ms'], /itl needs streamed requests/],
    [['--no-stream', '--slo', 'ttft_uncorrected.p99<2s'], /ttft_uncorrected needs streamed requests/],
    [['--no-stream', '--goodput', 'ttft:500'], /--goodput 'ttft:500': ttft and tpot need streamed requests.*\(--no-stream\); judge e2el/],
    [['--no-stream', '--goodput', 'tpot:50 e2el:5000'], /ttft and tpot need streamed requests/],
    [['--endpoint', 'embeddings', '--slo', 'itl.p99<1s'], /itl needs streamed requests.*\(--endpoint embeddings\)/],
  ];
  for (const [args, re] of refused) {
    const out = path.join(tmp, 'refused');
    const r = await ts(['run', ...load(), ...args, '-q', '--out', out]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, re, args.join(' '));
    assert.ok(!fs.existsSync(path.join(out, 'result.json')), 'refused before any load');
  }
  // what a whole answer has stays allowed
  const out = path.join(tmp, 'allowed');
  const r = await ts(['run', ...load(), '--no-stream', '--slo', 'e2el.p99<60s', '--slo', 'tpot_incl_ttft.p99<60s',
    '--goodput', 'e2el:60000', '--slo', 'goodput>0', '-q', '--out', out]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(readJson(path.join(out, 'result.json')).summary.good, 8);
});

// A scenario of one class; extra is YAML appended to the class.
function scenario(name, extra) {
  const f = path.join(tmp, `${name}.yaml`);
  fs.writeFileSync(f, `name: ${name}\nrequests: 4\nclasses:\n  - name: c\n    rate: 20\n    input_tokens: fixed:32\n    output_tokens: fixed:8\n${extra}`);
  return f;
}

test('a scenario class that does not stream refuses its own TTFT/TPOT SLOs and goodput', async () => {
  const cases = [
    ['    stream: false\n    slos: ["tpot.p99<1ms"]\n', /class 'c': slo 'tpot\.p99<1ms': tpot needs streamed requests.*\(stream: false\)/],
    ['    stream: false\n    goodput: "ttft:500"\n', /class 'c': goodput 'ttft:500': ttft and tpot need streamed requests/],
    ['    body: {stream: false}\n    slos: ["itl.p99<1s"]\n', /itl needs streamed requests.*\(body: \{stream: false\}\)/],
  ];
  for (const [i, [yaml, re]] of cases.entries()) {
    const r = await ts(['run', '--target', sim.base, '-q', '--out', path.join(tmp, `sc-${i}`), scenario(`ns${i}`, yaml)]);
    assert.equal(r.code, 2, `${yaml}: ${r.stderr}`);
    assert.match(r.stderr, re, yaml);
  }
  // a run-level SLO on TTFT when no class streams
  const f = scenario('ns-run', '    stream: false\n');
  const r = await ts(['run', '--target', sim.base, '-q', '--slo', 'ttft.p99<1s', '--out', path.join(tmp, 'sc-run'), f]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /ttft needs streamed requests.*\(no class of the scenario streams\)/);
  // and the class runs with what it can have
  const ok = scenario('ns-ok', '    stream: false\n    slos: ["e2el.p99<60s"]\n');
  const out = path.join(tmp, 'sc-ok');
  const r2 = await ts(['run', '--target', sim.base, '-q', '--out', out, ok]);
  assert.equal(r2.code, 0, r2.stderr);
  const doc = readJson(path.join(out, 'result.json'));
  assert.equal(doc.latency.ttft.count, 0);
  assert.equal(doc.summary.p99_ttft_ms, null);
  assert.equal(doc.classes[0].summary.p99_tpot_ms, null);
});

test('options a scenario class sets for itself are refused with a scenario file, naming what to do', async () => {
  const f = scenario('opts', '');
  const refused = [
    [['--rate', '50'], '--rate', 'rate'],
    [['--arrival', 'constant'], '--arrival', 'arrival'],
    [['--stages', '1s:5'], '--stages', 'stages'],
    [['--ramp-to', '30'], '--ramp-to', 'stages'],
    [['--concurrency', '4'], '--concurrency', 'users'],
    [['--think', 'fixed:1'], '--think', 'think'],
    [['--ramp-users', '1s'], '--ramp-users', 'ramp_users'],
    [['--endpoint', 'completions'], '--endpoint', 'endpoint'],
    [['--input-len', 'fixed:10'], '--input-len', 'input_tokens'],
    [['--output-len', 'fixed:10'], '--output-len', 'output_tokens'],
    [['--prompts', f], '--prompts', 'prompts_file'],
    [['--system-prompt', 'be brief'], '--system-prompt', 'system'],
    [['--body', '{"temperature":0}'], '--body', 'body'],
    [['--no-stream'], '--no-stream', 'stream: false'],
    [['--no-ignore-eos'], '--no-ignore-eos', 'ignore_eos: false'],
  ];
  for (const [args, opt, key] of refused) {
    const out = path.join(tmp, 'opt-refused');
    const r = await ts(['run', '--target', sim.base, ...args, '-q', '--out', out, f]);
    assert.equal(r.code, 2, `${opt}: ${r.stderr}`);
    assert.ok(r.stderr.includes(`${opt} does not apply to a scenario file`), `${opt}: ${r.stderr}`);
    assert.ok(r.stderr.includes(`\`${key}`), `${opt}: ${r.stderr}`);
    assert.ok(!fs.existsSync(path.join(out, 'result.json')), opt);
    const c = await ts(['run', ...args, '--check', f]); // --check says so too
    assert.equal(c.code, 2, `${opt} --check: ${c.stderr}`);
  }
  // the run-wide options apply, and result.json records only what applied
  const out = path.join(tmp, 'opt-ok');
  const r = await ts(['run', '--target', sim.base, '--requests', '3', '--seed', '7', '--workers', '1',
    '--duration', '10s', '-q', '--out', out, f]);
  assert.equal(r.code, 0, r.stderr);
  const doc = readJson(path.join(out, 'result.json'));
  assert.equal(doc.summary.requests, 3);
  assert.equal(doc.run.seed, 7);
  assert.equal(doc.run.workers, 1);
  assert.equal(doc.run.mode, 'scenario');
  for (const k of ['rate', 'arrival', 'users', 'input_len', 'output_len', 'stream', 'ignore_eos']) {
    assert.equal(doc.run[k], undefined, `run.${k} is the classes' business`);
  }
  assert.equal(doc.run.endpoint, null);
});
