// The vLLM-named fields of result.json (mean_/median_/std_/pNN_{ttft,tpot,itl,
// e2el}_ms) recomputed here the way vLLM's benchmark does (numpy's mean,
// population std and linear percentiles), from requests.jsonl and, for ITL,
// from each request's chunk arrival times (--save-chunk-times).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-vllm-'));
let sim;

before(async () => {
  sim = await startSim(['--profile', 'tiny']);
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const run = (args) => runBin(['run', ...args]);

// numpy.percentile(v, p), method "linear" (the default).
function percentile(sorted, p) {
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  if (lo >= sorted.length - 1) return sorted[sorted.length - 1];
  const t = rank - lo;
  return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * t;
}

// What vLLM's calculate_metrics writes for one list of values in ms.
function numpyStats(values) {
  const v = [...values].sort((a, b) => a - b);
  const mean = v.reduce((a, b) => a + b, 0) / v.length;
  const std = Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / v.length);
  const out = { mean, std, median: percentile(v, 50) };
  for (const p of [50, 90, 95, 99, 99.9]) out[`p${p}`] = percentile(v, p);
  return out;
}

test('vLLM-named fields equal numpy over requests.jsonl and the chunk times', async () => {
  const out = path.join(tmp, 'run');
  const r = await run(['--target', sim.base, '--rate', '30', '--requests', '60', '--input-len',
    'uniform:20-200', '--output-len', 'uniform:4-40', '--save-chunk-times', '--out', out,
    '--seed', '3', '-q', '--workers', '2']);
  assert.equal(r.code, 0, r.stderr);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  const lines = fs.readFileSync(path.join(out, 'requests.jsonl'), 'utf8').split('\n')
    .filter(Boolean).map((l) => JSON.parse(l));
  const ok = lines.filter((q) => q.outcome === 'ok' && !q.warmup);
  assert.equal(ok.length, 60);

  const itl = [];
  for (const q of ok) {
    assert.ok(Array.isArray(q.chunk_us), `request ${q.id} has chunk times`);
    assert.equal(q.chunk_us.length, q.choice_chunks);
    assert.equal(q.chunk_us_complete, true);
    // the first chunk time is the TTFT point: first_chunk_ms - start_ms
    assert.ok(Math.abs(q.chunk_us[0] / 1000 - (q.first_chunk_ms - q.start_ms)) <= 0.002);
    for (let i = 1; i < q.chunk_us.length; i++) itl.push((q.chunk_us[i] - q.chunk_us[i - 1]) / 1000);
  }
  const lists = {
    ttft: ok.map((q) => q.ttft_ms),
    e2el: ok.map((q) => q.e2el_ms),
    tpot: ok.filter((q) => q.output_tokens > 1).map((q) => q.tpot_ms),
    itl,
  };
  // requests.jsonl rounds to the microsecond (each ITL gap is a difference of
  // two rounded offsets): 2 us covers it, far below an HDR bucket's width.
  const tol = 0.002;
  for (const [name, values] of Object.entries(lists)) {
    assert.equal(result.vllm.fields[name].method, 'exact', name);
    assert.equal(result.vllm.fields[name].samples, values.length, name);
    const want = numpyStats(values);
    for (const [stat, w] of Object.entries(want)) {
      const key = `${stat}_${name}_ms`;
      const got = result.summary[key];
      assert.ok(Math.abs(got - w) <= tol, `${key}: result.json ${got}, numpy ${w}`);
    }
  }
  // total input tokens: ours (usage) and vLLM's (the lengths sent)
  const inTok = result.vllm.differences.total_input_tokens;
  assert.equal(inTok.tokenstorm, ok.reduce((a, q) => a + q.usage_prompt_tokens, 0));
  assert.equal(inTok.vllm, ok.reduce((a, q) => a + q.prompt_tokens, 0));
  assert.equal(result.summary.total_input_tokens, inTok.tokenstorm);
  // vLLM's chat E2EL ends at the usage-only chunk: the tail after the last
  // chunk with choices, per request in last_event_ms, averaged in result.json
  const tails = ok.filter((q) => q.last_event_ms > q.last_chunk_ms)
    .map((q) => q.last_event_ms - q.last_chunk_ms);
  const end = result.vllm.differences.e2el_end;
  assert.equal(end.tail_requests, tails.length);
  // (the simulator writes the usage chunk with the last one: often no tail)
  if (tails.length) {
    const meanTail = tails.reduce((a, b) => a + b, 0) / tails.length;
    assert.ok(Math.abs(end.mean_tail_ms - meanTail) <= tol, `tail ${end.mean_tail_ms} vs ${meanTail}`);
  } else {
    assert.equal(end.mean_tail_ms, null);
  }
  for (const q of ok) assert.ok(q.last_event_ms >= q.last_chunk_ms, `request ${q.id}`);
});

test('without --save-chunk-times the lines hold no chunk times', async () => {
  const out = path.join(tmp, 'plain');
  const r = await run(['--target', sim.base, '--rate', '20', '--requests', '5', '--output-len',
    'fixed:8', '--save-requests', '--out', out, '-q']);
  assert.equal(r.code, 0, r.stderr);
  const line = JSON.parse(fs.readFileSync(path.join(out, 'requests.jsonl'), 'utf8').split('\n')[0]);
  assert.equal(line.chunk_us, undefined);
});
