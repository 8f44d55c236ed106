// recall@k wherever results go: requests.jsonl lines (and a killed run
// rebuilt from them), `merge` (exact: the
// distribution travels in result.json's vector_search.state), `compare`
// (rows and a --fail-on rule on a drop) and, with an MPI build, the ranks
// of one run. Two runs of the built-in simulator's real FAISS index at
// nprobe 1 and 4. Skipped when the build has no FAISS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, BIN } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-recallres-'));
const N = 80;
const common = ['--endpoint', 'vector-search', '--vector-data', 'gen:3000x8', '--vector-index', 'IVF32,Flat',
  '--vector-queries', `gen:${N}`, '--requests', String(N), '--save-requests', '-q'];
let faiss = true;
const runs = {};

const readJson = (f) => JSON.parse(fs.readFileSync(f, 'utf8'));
const readJsonl = (f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

// The run's own p5: the lower edge of the 0.001-wide bin of the nearest-rank 5th percentile.
function p5(values) {
  const v = [...values].sort((a, b) => a - b);
  const x = v[Math.max(0, Math.ceil(0.05 * v.length) - 1)];
  return Math.floor(x * 1000 + 1e-9) / 1000;
}

before(async () => {
  for (const nprobe of [1, 4]) {
    const out = path.join(tmp, `n${nprobe}`);
    const r = await runBin(['run', ...common, '--nprobe', String(nprobe), '--out', out], { timeoutMs: 120000 });
    if (r.code !== 0 && /no FAISS/.test(r.stderr)) {
      faiss = false;
      return;
    }
    assert.equal(r.code, 0, r.stderr);
    runs[nprobe] = { out, res: readJson(path.join(out, 'result.json')), lines: readJsonl(path.join(out, 'requests.jsonl')) };
  }
});

after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test('requests.jsonl carries each search\'s recall@k; result.json agrees with the lines', (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  for (const { res, lines } of Object.values(runs)) {
    assert.equal(lines.length, N);
    for (const l of lines) {
      assert.equal(l.recall_k, 10);
      assert.ok(l.recall >= 0 && l.recall <= 1 && Math.abs(l.recall * 10 - Math.round(l.recall * 10)) < 1e-9);
    }
    const mean = lines.reduce((a, l) => a + l.recall, 0) / N;
    assert.ok(Math.abs(res.vector_search.recall_mean - mean) < 1e-9);
    assert.equal(res.vector_search.recall_p5, p5(lines.map((l) => l.recall)));
  }
  assert.ok(runs[1].res.vector_search.recall_mean < runs[4].res.vector_search.recall_mean);
});

test('a killed run\'s recall is rebuilt from requests.jsonl', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const dir = path.join(tmp, 'killed');
  fs.mkdirSync(dir);
  fs.copyFileSync(path.join(runs[1].out, 'requests.jsonl'), path.join(dir, 'requests.jsonl'));
  const r = await runBin(['report', '--format', 'json', dir]);
  assert.equal(r.code, 0, r.stderr);
  const vs = JSON.parse(r.stdout).inputs[0].vector_search;
  assert.equal(vs.searches, N);
  assert.ok(Math.abs(vs.recall_mean - runs[1].res.vector_search.recall_mean) < 1e-9);
  assert.equal(vs.recall_p5, runs[1].res.vector_search.recall_p5);
});

test('merge keeps recall exact: the mean and p5 of all the searches', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const out = path.join(tmp, 'merged');
  const r = await runBin(['merge', runs[1].out, runs[4].out, '--out', out]);
  assert.equal(r.code, 0, r.stderr);
  const vs = readJson(path.join(out, 'result.json')).vector_search;
  const all = [...runs[1].lines, ...runs[4].lines].map((l) => l.recall);
  assert.equal(vs.searches, 2 * N);
  assert.ok(Math.abs(vs.recall_mean - all.reduce((a, b) => a + b, 0) / all.length) < 1e-9);
  assert.equal(vs.recall_p5, p5(all));
  assert.equal(vs.recall_min, Math.min(...all));
  // the merged file merges again (its state is read back like the inputs')
  const again = path.join(tmp, 'merged2');
  const r2 = await runBin(['merge', out, runs[1].out, '--out', again]);
  assert.equal(r2.code, 0, r2.stderr);
  assert.equal(readJson(path.join(again, 'result.json')).vector_search.searches, 3 * N);
});

test('compare shows recall and --fail-on gates a drop', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const worse = await runBin(['compare', runs[4].out, runs[1].out, '--fail-on', 'recall<-5pp']);
  assert.equal(worse.code, 1, worse.stdout + worse.stderr);
  assert.match(worse.stdout, /^recall \(fraction\) +0\.\d+ +0\.\d+ +-0\.\d+ .*REGRESSION$/m);
  assert.match(worse.stdout, /^recall_p5 \(fraction\)/m);
  assert.match(worse.stdout, /recall<-5pp +REGRESSION/);
  const better = await runBin(['compare', runs[1].out, runs[4].out, '--fail-on', 'recall<-5pp']);
  assert.equal(better.code, 0, better.stdout + better.stderr);
  const bad = await runBin(['compare', runs[1].out, runs[4].out, '--fail-on', 'recall<-5ms']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /expected % or pp/);
});

const mpirun = spawnSync('sh', ['-c', 'command -v mpirun'], { encoding: 'utf8' }).stdout.trim();
const mpiSkip = process.env.TOKENSTORM_MPI_BUILD !== '1' ? 'built without MPI' : !mpirun ? 'no mpirun' : false;

test('mpirun -n 2: the ranks\' recall merged exactly', { skip: mpiSkip }, async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const out = path.join(tmp, 'mpi');
  const env = { ...process.env, ASAN_OPTIONS: 'detect_leaks=0', OMPI_MCA_rmaps_base_oversubscribe: '1' };
  const r = await runBin(['-n', '2', '--oversubscribe', '--allow-run-as-root', BIN, 'run', ...common,
    '--nprobe', '1', '--workers', '1', '--out', out], { bin: mpirun, env, timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const res = readJson(path.join(out, 'result.json'));
  assert.equal(res.run.mpi_ranks, 2);
  const lines = [0, 1].flatMap((k) => readJsonl(path.join(out, `rank-${k}`, 'requests.jsonl')));
  assert.equal(lines.length, N);
  assert.equal(res.vector_search.searches, N);
  const all = lines.map((l) => l.recall);
  assert.ok(Math.abs(res.vector_search.recall_mean - all.reduce((a, b) => a + b, 0) / N) < 1e-9);
  assert.equal(res.vector_search.recall_p5, p5(all));
  // the same queries as the single process: the same recall
  assert.ok(Math.abs(res.vector_search.recall_mean - runs[1].res.vector_search.recall_mean) < 1e-9);
});
