// Answer quality end to end: the simulator answers known prompts with
// reference answers (--answers); the run scores every answer against the
// prompts file's references, feeds the windowed dual SLA and the
// consistency check, and SLOs on them set the exit code.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, startSim } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-quality-'));
const qa = [
  ['What is the capital of France?', 'The capital of France is Paris.'],
  ['Who wrote Hamlet?', 'Hamlet was written by William Shakespeare.'],
  ['What is two plus two?', 'Two plus two is four.'],
];
const prompts = path.join(tmp, 'prompts.jsonl');
fs.writeFileSync(prompts, qa.map(([p, r]) => JSON.stringify({ prompt: p, reference: r })).join('\n') + '\n');
// the simulator knows the first two answers; the third gets pseudo-text
const answers = path.join(tmp, 'answers.jsonl');
fs.writeFileSync(answers, qa.slice(0, 2).map(([p, a]) => JSON.stringify({ prompt: p, answer: a })).join('\n') + '\n');
let sim;

before(async () => { sim = await startSim(['--profile', 'tiny', '--no-noise', '--answers', answers]); });
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

function run(args) {
  return new Promise((resolve) => {
    const p = spawn(BIN, ['run', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), 60000);
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, out }); });
  });
}

test('answers are scored against references; SLOs on quality set the exit code', async () => {
  const out = path.join(tmp, 'q1');
  const r = await run(['--target', sim.base, '--prompts', prompts, '--no-ignore-eos', '--output-len', 'fixed:40',
    '--requests', '30', '--rate', '40', '--body', '{"temperature":0}', '-q', '--out', out,
    '--dual-sla', 'window=6,quality=0.3,latency=0.9', '--consistency=threshold=0.9,window=3,k=2',
    '--slo', 'exact_match>=0.9']);
  assert.equal(r.code, 1, r.out); // only 2 of 3 prompts are answered exactly
  const q = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8')).quality;
  assert.equal(q.requests, 30);
  assert.equal(q.with_reference, 30);
  assert.ok(Math.abs(q.exact_match_rate - 2 / 3) < 1e-9, `exact ${q.exact_match_rate}`);
  assert.ok(q.rouge_l.mean > 0.6 && q.rouge_l.mean < 0.99, `rouge_l ${q.rouge_l.mean}`);
  assert.equal(q.rouge_l.p50, 1);
  // windows of 6 in completion order: at least a third quality-ok (2 of 3 prompts are
  // answered exactly), every request ok and no latency threshold -> all attain
  assert.equal(q.dual_sla.windows, 5);
  assert.equal(q.dual_sla.attained, 5);
  // temperature 0: repeated prompts get identical answers
  assert.equal(q.consistency.pairs, 27);
  assert.equal(q.consistency.mean_similarity, 1);
  assert.equal(q.consistency.steady, true);
});

test('the latency half of the dual SLA follows --goodput', async () => {
  const out = path.join(tmp, 'q3');
  const r = await run(['--target', sim.base, '--prompts', prompts, '--no-ignore-eos', '--output-len', 'fixed:40',
    '--requests', '12', '--rate', '40', '-q', '--out', out, '--goodput', 'ttft:0.001',
    '--dual-sla', 'window=4,quality=0,latency=0.5', '--slo', 'dual_sla>=50%']);
  assert.equal(r.code, 1, r.out); // no request has a TTFT under 1 µs
  const q = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8')).quality;
  assert.equal(q.dual_sla.windows, 3);
  assert.equal(q.dual_sla.attained, 0);
});

test('a regex and a JSON check on every answer', async () => {
  const out = path.join(tmp, 'q2');
  const r = await run(['--target', sim.base, '--prompts', prompts, '--no-ignore-eos', '--output-len', 'fixed:40',
    '--requests', '9', '--rate', '40', '-q', '--out', out, '--quality-regex', 'Paris|Shakespeare', '--quality-json',
    '--slo', 'regex_match>=0.6', '--slo', 'json_valid<0.01']);
  assert.equal(r.code, 0, r.out);
  const q = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8')).quality;
  assert.ok(Math.abs(q.regex_match_rate - 2 / 3) < 1e-9);
  assert.equal(q.json_valid_rate, 0);
});
