// Vector-search classes in scenario files, against the simulator's real
// FAISS index: a scenario mixes a chat class with two vector classes of
// different nprobe; each vector class's recall@k in result.json is the one
// this test computes itself from the simulator's own answers and a brute
// force; the chat class and the top of the run carry none. Skipped when the
// build has no FAISS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, postJson, rng } from './lib.mjs';

const N = 4000, DIM = 16, NQ = 40, K = 10, CLUSTERS = 32;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-vecscn-'));
let sim = null;
let faiss = true;
let corpus, queries, truth;

function clustered(n, seed, centres) {
  const r = rng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const v = new Float32Array(n * DIM);
  for (let i = 0; i < n; i++) {
    const c = Math.floor(r() * CLUSTERS);
    for (let d = 0; d < DIM; d++) v[i * DIM + d] = centres[c * DIM + d] + gauss();
  }
  return v;
}

function writeFvecs(file, rows, dim, arr) {
  const buf = Buffer.alloc(rows * (dim + 1) * 4);
  for (let i = 0; i < rows; i++) {
    buf.writeInt32LE(dim, i * (dim + 1) * 4);
    for (let d = 0; d < dim; d++) buf.writeFloatLE(arr[i * dim + d], i * (dim + 1) * 4 + 4 + d * 4);
  }
  fs.writeFileSync(file, buf);
}

function bruteForce() {
  const out = [];
  for (let q = 0; q < NQ; q++) {
    const d = [];
    for (let i = 0; i < N; i++) {
      let s = 0;
      for (let j = 0; j < DIM; j++) {
        const t = queries[q * DIM + j] - corpus[i * DIM + j];
        s += t * t;
      }
      d.push([s, i]);
    }
    d.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    out.push(d.slice(0, K).map((x) => x[1]));
  }
  return out;
}

before(async () => {
  const r = rng(5);
  const centres = Float32Array.from({ length: CLUSTERS * DIM }, () => 2 * r() - 1);
  corpus = clustered(N, 21, centres);
  queries = clustered(NQ, 23, centres);
  writeFvecs(path.join(tmp, 'corpus.fvecs'), N, DIM, corpus);
  writeFvecs(path.join(tmp, 'queries.fvecs'), NQ, DIM, queries);
  truth = bruteForce();
  try {
    sim = await startSim(['--profile', 'tiny', '--vector-data', path.join(tmp, 'corpus.fvecs'),
      '--vector-index', 'IVF64,Flat'], { timeoutMs: 60000 });
  } catch (e) {
    if (!/no FAISS/.test(String(e))) throw e;
    faiss = false;
  }
});

after(async () => {
  if (sim) await sim.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// The mean recall@K of the simulator's own answers at this nprobe, by this test.
async function expectedRecall(nprobe) {
  let sum = 0;
  for (let q = 0; q < NQ; q++) {
    const r = await postJson(sim.base, '/v1/vectors/search',
      { vector: Array.from(queries.subarray(q * DIM, (q + 1) * DIM)), k: K, nprobe });
    assert.equal(r.status, 200);
    const got = new Set(r.json.data.map((h) => h.id));
    sum += truth[q].filter((id) => got.has(id)).length / K;
  }
  return sum / NQ;
}

test('a scenario mixes chat and vector classes; each vector class has its own recall@k', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const file = path.join(tmp, 'mix.yaml');
  // paths relative to the scenario file; every class runs NQ iterations: one per query
  fs.writeFileSync(file, `name: mix
target: {url: ${sim.base}/v1}
duration: 60s
classes:
  - name: chat
    users: 1
    requests: 3
    input_tokens: fixed:16
    output_tokens: fixed:4
  - name: narrow
    endpoint: vector-search
    users: 1
    requests: ${NQ}
    vector: {data: corpus.fvecs, queries: queries.fvecs, k: ${K}, nprobe: 1}
  - name: wide
    endpoint: vector-search
    users: 2
    requests: ${NQ}
    vector: {data: corpus.fvecs, queries: queries.fvecs, k: ${K}, nprobe: 64}
    slos: [error_rate<0.01]
`);
  const chk = await runBin(['run', '--check', file]);
  assert.equal(chk.code, 0, chk.stderr);
  assert.match(chk.stdout, /narrow +closed loop 1 users, vector search/);
  const out = path.join(tmp, 'mix-out');
  const r = await runBin(['run', file, '--out', out], { timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stderr);
  const res = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  const cls = Object.fromEntries(res.classes.map((c) => [c.name, c]));
  assert.equal(cls.chat.vector_search, undefined);
  assert.equal(res.vector_search, undefined, 'a mixed run has recall per class only');
  const want1 = await expectedRecall(1);
  for (const [name, want] of [['narrow', want1], ['wide', 1]]) {
    const v = cls[name].vector_search;
    assert.ok(v, `${name}: vector_search`);
    assert.equal(v.k, K);
    assert.equal(v.searches, NQ, name);
    assert.ok(Math.abs(v.recall_mean - want) < 1e-9, `${name}: recall ${v.recall_mean}, expected ${want}`);
    assert.ok(v.recall_min <= v.recall_p5 && v.recall_p5 <= v.recall_p50);
    assert.equal(cls[name].summary.completed, NQ);
    assert.equal(cls[name].summary.failed, 0);
  }
  assert.ok(want1 < 0.95, `nprobe 1 recall ${want1} should be approximate`);
  t.diagnostic(`recall@${K}: narrow (nprobe 1) ${cls.narrow.vector_search.recall_mean}, wide (nprobe 64) 1`);
  // the console's per-class blocks carry the same line
  const narrowBlock = r.stdout.split('== class narrow')[1].split('== class wide')[0];
  assert.match(narrowBlock, new RegExp(`vector search ${NQ} searches at [0-9.]+/s: recall@${K} mean ${want1.toFixed(4)}`));
  assert.doesNotMatch(r.stdout.split('== class')[0], /vector search/);
});

test('the built-in simulator holds the classes\' generated corpus; one corpus only', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const file = path.join(tmp, 'builtin.yaml');
  fs.writeFileSync(file, `duration: 60s
classes:
  - name: exact
    endpoint: vector-search
    rate: 200
    requests: 30
    vector: {data: "gen:3000x8", index: "IVF32,Flat", queries: "gen:30", nprobe: 32}
  - name: approx
    endpoint: vector-search
    users: 1
    requests: 30
    vector: {data: "gen:3000x8", index: "IVF32,Flat", queries: "gen:30", nprobe: 1, k: 5}
`);
  const out = path.join(tmp, 'builtin-out');
  const r = await runBin(['run', file, '--out', out, '-q'], { timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stderr);
  const res = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  const [exact, approx] = res.classes;
  assert.equal(exact.vector_search.recall_mean, 1); // every list probed
  assert.equal(exact.vector_search.searches, 30);
  assert.equal(approx.vector_search.k, 5);
  assert.ok(approx.vector_search.recall_mean < 1);
  // only vector classes: the run's top carries the recall over both
  assert.equal(res.vector_search.searches, 60);

  fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace('gen:3000x8", index: "IVF32,Flat", queries: "gen:30", nprobe: 1',
    'gen:2000x8", index: "IVF32,Flat", queries: "gen:30", nprobe: 1'));
  const bad = await runBin(['run', file, '--out', path.join(tmp, 'bad'), '-q']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /builtin\.yaml:12:\d+: class 'approx': vector data, index and seed must be those of class 'exact'/);
  // a missing query file is a usage error naming the class and the key
  fs.writeFileSync(file, `classes:
  - name: v
    endpoint: vector-search
    users: 1
    vector: {data: "gen:3000x8", queries: nothere.fvecs}
`);
  const miss = await runBin(['run', file, '--out', path.join(tmp, 'miss'), '-q']);
  assert.equal(miss.code, 2, miss.stderr);
  assert.match(miss.stderr, /class 'v': vector\.queries: .*nothere\.fvecs/);
});
