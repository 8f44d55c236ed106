// Answer quality in a chaos experiment: the simulator answers known prompts
// with their reference answers (--answers), a proxy in front hallucinates
// entities for 3 s (llm_hallucinate, rate 1), and a `rouge_l>0.9` probe,
// judged per window from requests.jsonl's per-request scores, breaks during
// the fault and holds again after it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, startServer, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-chaosq-'));
const procs = [];

after(async () => {
  for (const p of procs) await p.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

// Every answer is made of named entities the hallucination replaces.
const qa = [
  ['What is the capital of France?', 'The capital of France is Paris.'],
  ['Who wrote Hamlet?', 'Hamlet was written by William Shakespeare.'],
  ['Where is the Eiffel Tower?', 'The Eiffel Tower stands in Paris, France.'],
];
const prompts = path.join(tmp, 'prompts.jsonl');
fs.writeFileSync(prompts, qa.map(([p, r]) => JSON.stringify({ prompt: p, reference: r })).join('\n') + '\n');
const answers = path.join(tmp, 'answers.jsonl');
fs.writeFileSync(answers, qa.map(([p, a]) => JSON.stringify({ prompt: p, answer: a })).join('\n') + '\n');

function experiment(name, doc) {
  const file = path.join(tmp, name + '.yaml');
  fs.writeFileSync(file, JSON.stringify(doc, null, 1));
  return file;
}

test('quality probes in an experiment: hallucinations break rouge_l, it recovers', async () => {
  const sim = await startSim(['--profile', 'tiny', '--no-noise', '--answers', answers]);
  procs.push(sim);
  const proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--seed', '3']);
  procs.push(proxy);
  for (let i = 0; i < 100 && !/control API on http/.test(proxy.output); i++) await sleep(20);
  const m = proxy.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/);
  assert.ok(m, proxy.output);

  const file = experiment('hallucinate', {
    title: 'hallucinated entities for 3 s',
    hypothesis: { probes: [{ slo: 'rouge_l>0.9' }, { slo: 'exact_match>=90%', during: 'exact_match>=0%' }] },
    method: [{ name: 'hallucinate', at: '3s', for: '3s', proxy: m[1],
      fault: { type: 'llm_hallucinate', rate: 1 } }],
    load: ['--target', proxy.base + '/v1', '--prompts', prompts, '--no-ignore-eos', '--output-len', 'fixed:40',
      '--rate', '20', '--duration', '10s', '--seed', '2', '--body', '{"temperature":0}'],
  });
  const out = path.join(tmp, 'out');
  const r = await runBin(['chaos', file, '--out', out], { timeoutMs: 40000 });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const e = JSON.parse(fs.readFileSync(path.join(out, 'experiment.json'), 'utf8'));
  assert.equal(e.verdict, 'deviated', JSON.stringify(e, null, 1));
  assert.equal(e.steady_before, true);
  // before the fault every answer is its reference
  assert.equal(e.baseline.probes[0].slo, 'rouge_l>0.9');
  assert.equal(e.baseline.probes[0].actual, 1);
  assert.equal(e.baseline.probes[1].actual, 1);
  // during it the entities are replaced: no exact match, rouge_l well below 0.9
  const ph = e.phases[0];
  assert.equal(ph.name, 'hallucinate');
  assert.ok(ph.requests >= 40, `requests during the fault ${ph.requests}`);
  assert.equal(ph.failed, 0);
  assert.equal(ph.probes[0].holds, false);
  assert.ok(ph.probes[0].actual < 0.8, `rouge_l during the fault ${ph.probes[0].actual}`);
  assert.equal(ph.probes[1].slo, 'exact_match>=0%');
  assert.ok(ph.probes[1].actual < 0.1, `exact_match during the fault ${ph.probes[1].actual}`);
  // after it the answers are right again
  assert.equal(typeof e.recovery_s, 'number');
  assert.ok(e.recovery_s >= 0 && e.recovery_s <= 2, `recovery ${e.recovery_s}`);
  const last = e.recovery[e.recovery.length - 1];
  assert.equal(last.holds, true);
  assert.equal(last.probes[0].actual, 1);

  // the scores are in requests.jsonl, one object per scored answer
  const lines = fs.readFileSync(path.join(out, 'run', 'requests.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const scored = lines.filter((l) => !l.warmup && l.outcome === 'ok');
  assert.ok(scored.length >= 150, `ok requests ${scored.length}`);
  for (const l of scored) {
    assert.equal(typeof l.quality.rouge_l, 'number');
    assert.equal(typeof l.quality.bleu4, 'number');
    assert.equal(typeof l.quality.exact, 'boolean');
    assert.equal(l.quality.truncated, false);
    assert.equal(l.quality.regex_match, undefined); // no --quality-regex
  }
  assert.ok(scored.some((l) => !l.quality.exact) && scored.some((l) => l.quality.exact));
});

test('a dual_sla probe needs the load\'s --dual-sla; consistency probes are refused', async () => {
  const file = experiment('dual', {
    title: 'dual', hypothesis: { probes: [{ slo: 'dual_sla>=95%' }] },
    method: [{ name: 'h', at: '3s', for: '3s', proxy: 'http://127.0.0.1:1',
      fault: { type: 'llm_hallucinate', rate: 1 } }],
    load: ['--target', 'http://127.0.0.1:1/v1', '--duration', '10s'],
  });
  const r = await runBin(['chaos', '--check', file], { timeoutMs: 40000 });
  assert.equal(r.code, 2, r.stdout + r.stderr);
  assert.match(r.stderr, /probe 'dual_sla>=95%': dual_sla needs the load's --dual-sla/);
});
