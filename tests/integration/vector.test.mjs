// Vector search under load against the simulator's real FAISS index: the
// raw-vector endpoint answers what a brute-force search in this test finds,
// and `run --endpoint vector-search` measures recall@10 that rises with
// nprobe while throughput falls, with ground truth that agrees with the
// test's own brute force. Skipped when the build has no FAISS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, postJson, rng } from './lib.mjs';

const N = 20000, DIM = 64, NQ = 200, K = 10, CLUSTERS = 64;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-vector-'));
const corpusPath = path.join(tmp, 'corpus.fvecs');
const queriesPath = path.join(tmp, 'queries.fvecs');
const truthPath = path.join(tmp, 'truth.ivecs');
let sim = null;
let faiss = true;
let corpus, queries, truth;

// Clustered Gaussian vectors: centres in [-1,1]^DIM, spread 1 (overlapping).
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

function writeXvecs(file, rows, dim, arr, Type) {
  const buf = Buffer.alloc(rows * (dim + 1) * 4);
  for (let i = 0; i < rows; i++) {
    buf.writeInt32LE(dim, i * (dim + 1) * 4);
    const row = new Type(buf.buffer, buf.byteOffset + i * (dim + 1) * 4 + 4, dim);
    row.set(arr.subarray(i * dim, (i + 1) * dim));
  }
  fs.writeFileSync(file, buf);
}

// The exact K nearest rows of the corpus for each query (squared L2).
function bruteForce() {
  const out = new Int32Array(NQ * K);
  const d = new Float64Array(N);
  const idx = new Int32Array(N);
  for (let q = 0; q < NQ; q++) {
    for (let i = 0; i < N; i++) {
      let s = 0;
      for (let j = 0; j < DIM; j++) {
        const t = queries[q * DIM + j] - corpus[i * DIM + j];
        s += t * t;
      }
      d[i] = s;
      idx[i] = i;
    }
    idx.sort((a, b) => d[a] - d[b] || a - b);
    out.set(idx.subarray(0, K), q * K);
  }
  return out;
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

before(async () => {
  const r = rng(7);
  const centres = Float32Array.from({ length: CLUSTERS * DIM }, () => 2 * r() - 1);
  corpus = clustered(N, 11, centres);
  queries = clustered(NQ, 13, centres);
  writeXvecs(corpusPath, N, DIM, corpus, Float32Array);
  writeXvecs(queriesPath, NQ, DIM, queries, Float32Array);
  truth = bruteForce();
  writeXvecs(truthPath, NQ, K, truth, Int32Array);
  try {
    sim = await startSim(['--profile', 'tiny', '--vector-data', corpusPath, '--vector-index', 'IVF256,Flat'],
      { timeoutMs: 120000 });
  } catch (e) {
    if (!/no FAISS/.test(String(e))) throw e;
    faiss = false;
  }
});

after(async () => {
  if (sim) await sim.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const search = (body) => postJson(sim.base, '/v1/vectors/search', body);
const qvec = (q) => Array.from(queries.subarray(q * DIM, (q + 1) * DIM));

test('the corpus and its index are described, bad searches are refused by field', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const info = await (await fetch(sim.base + '/v1/vectors', { signal: AbortSignal.timeout(10000) })).json();
  assert.equal(info.count, N);
  assert.equal(info.dim, DIM);
  assert.equal(info.kind, 'ivf');
  assert.equal(info.nlist, 256);
  assert.equal(info.index, 'IVF256,Flat');
  for (const [body, param] of [
    [{ vector: [1, 2, 3] }, 'vector'],
    [{ vector: qvec(0), k: 0 }, 'k'],
    [{ vector: qvec(0), k: 2000 }, 'k'],
    [{ vector: qvec(0), nprobe: -1 }, 'nprobe'],
    [{ vector: qvec(0), ef_search: 'x' }, 'ef_search'],
    [{ vector: [...qvec(0).slice(1), 'a'] }, 'vector'],
  ]) {
    const r = await search(body);
    assert.equal(r.status, 400, JSON.stringify(body).slice(0, 80));
    assert.equal(r.json.error.param, param);
  }
  const bad = await search('{"vector":');
  assert.equal(bad.status, 400);
  assert.match(bad.json.error.message, /JSON/);
  const get = await fetch(sim.base + '/v1/vectors/search', { signal: AbortSignal.timeout(10000) });
  assert.equal(get.status, 405);
});

test('nprobe = nlist is the exact answer; the search time grows with nprobe', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  for (let q = 0; q < 5; q++) {
    const r = await search({ vector: qvec(q), k: K, nprobe: 256 });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json.data.map((h) => h.id), Array.from(truth.subarray(q * K, (q + 1) * K)));
    const ds = r.json.data.map((h) => h.distance);
    assert.deepEqual(ds, [...ds].sort((a, b) => a - b));
  }
  // the server's own search time (median of 31, robust to a preempted one)
  const times = {};
  for (const nprobe of [1, 256]) {
    times[nprobe] = [];
    for (let q = 0; q < 31; q++)
      times[nprobe].push((await search({ vector: qvec(q), k: K, nprobe })).json.search_ms);
  }
  assert.ok(median(times[256]) > 4 * median(times[1]),
    `nprobe 256: ${median(times[256])} ms, nprobe 1: ${median(times[1])} ms`);
});

async function vectorRun(extra, name) {
  const out = path.join(tmp, name);
  const r = await runBin(['run', '--target', sim.base, '--endpoint', 'vector-search',
    '--vector-data', corpusPath, '--vector-queries', queriesPath, '--concurrency', '1',
    '--requests', '400', '--out', out, '-q', ...extra], { timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stderr);
  return { ...JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8')), dir: out };
}

test('run --endpoint vector-search: recall@10 rises and QPS falls with nprobe', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const res = {};
  for (const nprobe of [1, 8, 64, 256]) res[nprobe] = await vectorRun(['--nprobe', String(nprobe)], `np${nprobe}`);
  const recall = (n) => res[n].vector_search.recall_mean;
  const qps = (n) => res[n].vector_search.qps;
  t.diagnostic(`recall@10 ${[1, 8, 64, 256].map((n) => `nprobe ${n}: ${recall(n).toFixed(3)} at ${qps(n).toFixed(0)}/s, p50 ${res[n].vector_search.latency_p50_ms} ms`).join('; ')}`);
  for (const n of [1, 8, 64, 256]) {
    const v = res[n].vector_search;
    assert.equal(v.k, 10);
    assert.equal(v.searches, 400);
    assert.ok(v.recall_p5 <= v.recall_p50 && v.recall_min <= v.recall_p5);
    assert.ok(v.latency_p99_ms >= v.latency_p50_ms);
    assert.equal(res[n].run.vector.truth_method, 'faiss-flat');
  }
  assert.ok(recall(1) + 0.1 < recall(8), 'nprobe 1 -> 8');
  assert.ok(recall(8) + 0.05 < recall(64), 'nprobe 8 -> 64');
  assert.ok(recall(64) <= recall(256));
  assert.equal(recall(256), 1); // every list: exact
  assert.ok(recall(1) < 0.8);
  // one request at a time: the median latency is the search's cost plus a
  // constant, robust to a preempted moment (the QPS of a 0.3 s run is not)
  const p50 = (n) => res[n].vector_search.latency_p50_ms;
  assert.ok(p50(1) < p50(256) && p50(8) < p50(256), `p50 ${[1, 8, 64, 256].map(p50).join(', ')} ms`);
  // the ground truth tokenstorm computed is the test's brute force
  const saved = fs.readFileSync(path.join(res[8].dir, 'vector_truth.ivecs'));
  assert.equal(saved.length, NQ * (K + 1) * 4);
  for (let q = 0; q < NQ; q++) {
    assert.equal(saved.readInt32LE(q * (K + 1) * 4), K);
    for (let j = 0; j < K; j++)
      assert.equal(saved.readInt32LE(q * (K + 1) * 4 + 4 + j * 4), truth[q * K + j], `query ${q} rank ${j}`);
  }
  // report shows the recall line again from result.json, and the HTML page its table
  const txt = await runBin(['report', res[8].dir], { timeoutMs: 30000 });
  assert.equal(txt.code, 0, txt.stderr);
  assert.match(txt.stdout, new RegExp(`vector search 400 searches at [0-9.]+/s: recall@10 mean ${recall(8).toFixed(4)}`));
  const html = await runBin(['report', '--format', 'html', res[8].dir], { timeoutMs: 30000 });
  assert.equal(html.code, 0, html.stderr);
  assert.match(html.stdout, /Vector search: recall@k under load/);
  assert.match(html.stdout, /recall_p5/);
  // the same truth from a file gives the same recall
  const fromFile = await vectorRun(['--nprobe', '8', '--vector-truth', truthPath], 'np8-file');
  assert.equal(fromFile.run.vector.truth_method, 'file');
  assert.equal(fromFile.vector_search.recall_mean, recall(8));
});

test('a truth file that does not fit the queries is a usage error naming it', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const short = path.join(tmp, 'short.ivecs');
  writeXvecs(short, 3, K, truth, Int32Array);
  const r = await runBin(['run', '--target', sim.base, '--endpoint', 'vector-search',
    '--vector-data', corpusPath, '--vector-queries', queriesPath, '--vector-truth', short,
    '--requests', '5', '--out', path.join(tmp, 'bad'), '-q'], { timeoutMs: 60000 });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--vector-truth .*short\.ivecs: 3 rows of 10 ids/);
  const r2 = await runBin(['run', '--endpoint', 'vector-search', '--vector-data', 'gen:10x0',
    '--requests', '5', '--out', path.join(tmp, 'bad2'), '-q'], { timeoutMs: 60000 });
  assert.equal(r2.code, 2);
  assert.match(r2.stderr, /--vector-data/);
  const r3 = await runBin(['run', '--nprobe', '8', '--requests', '1', '--out', path.join(tmp, 'bad3'), '-q'],
    { timeoutMs: 60000 });
  assert.equal(r3.code, 2);
  assert.match(r3.stderr, /need --endpoint vector-search/);
});

test('sweep --vary nprobe: one step per value, the recall table and knee in sweep.json', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const out = path.join(tmp, 'sweep');
  const runOpts = ['--target', sim.base, '--endpoint', 'vector-search', '--vector-data', corpusPath,
    '--vector-queries', queriesPath, '--vector-truth', truthPath, '--concurrency', '1', '--requests', '300'];
  const r = await runBin(['sweep', '--vary', 'nprobe=64,1,8', '--out', out, '-q', '--', ...runOpts],
    { timeoutMs: 240000 });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /nprobe\s+recall\s+recall p5\s+QPS/);
  const sw = JSON.parse(fs.readFileSync(path.join(out, 'sweep.json'), 'utf8'));
  assert.equal(sw.mode, 'nprobe');
  assert.equal(sw.plan, 'vary');
  assert.deepEqual(sw.steps.map((s) => s.load), [1, 8, 64]);
  const rec = sw.steps.map((s) => s.vector_search.recall_mean);
  assert.ok(rec[0] + 0.1 < rec[1] && rec[1] + 0.05 < rec[2], `recall ${rec}`);
  for (const s of sw.steps) {
    const res = JSON.parse(fs.readFileSync(path.join(out, s.dir, 'result.json'), 'utf8'));
    assert.equal(res.run.vector.nprobe, s.load); // each step ran with its own --nprobe
  }
  // with three points only the middle one can be the knee
  assert.ok(sw.recall_knee === null || sw.recall_knee.load === 8, JSON.stringify(sw.recall_knee));
  // the HTML report draws recall against QPS and against p99, one dot per step
  const html = path.join(tmp, 'sweep.html');
  const rep = await runBin(['report', '--format', 'html', '-o', html, out]);
  assert.equal(rep.code, 0, rep.stderr);
  const page = fs.readFileSync(html, 'utf8');
  for (const id of ['recall-qps', 'recall-p99']) {
    const chart = page.split(`id="sweep1-${id}"`)[1]?.split('</svg>')[0];
    assert.ok(chart, `chart ${id}`);
    assert.equal((chart.match(/<circle/g) || []).length >= 3, true, `${id}: a dot per step`);
  }
  // the varied option is the sweep's: passing it through is refused
  const bad = await runBin(['sweep', '--vary', 'nprobe=1,8', '--out', path.join(tmp, 'sweep-bad'), '--',
    ...runOpts, '--nprobe', '4'], { timeoutMs: 30000 });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--nprobe cannot be passed to the runs/);
});

test('--vector-api: a template written for the simulator measures the same recall', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const tpl = path.join(tmp, 'sim-template.json');
  // another shape than the native body: keys reordered, k and nprobe from placeholders
  fs.writeFileSync(tpl, JSON.stringify({
    path: '/v1/vectors/search',
    body: { nprobe: '{{nprobe}}', k: '{{k}}', vector: '{{vector}}', note: 'template' },
    results: '/data', id: '/id',
  }));
  const native = await vectorRun(['--nprobe', '8', '--vector-truth', truthPath], 'tpl-native');
  const viaFile = await vectorRun(['--nprobe', '8', '--vector-truth', truthPath, '--vector-api', `@${tpl}`], 'tpl-file');
  const viaPreset = await vectorRun(['--nprobe', '8', '--vector-truth', truthPath, '--vector-api', 'tokenstorm'], 'tpl-preset');
  assert.equal(viaFile.vector_search.recall_mean, native.vector_search.recall_mean);
  assert.equal(viaPreset.vector_search.recall_mean, native.vector_search.recall_mean);
  assert.equal(viaFile.run.vector.api.path, '/v1/vectors/search');
  // an answer without the results array is malformed, and says where it looked
  const wrong = path.join(tmp, 'wrong-template.json');
  fs.writeFileSync(wrong, JSON.stringify({ path: '/v1/vectors/search', body: { vector: '{{vector}}' }, results: '/hits', id: '/id' }));
  const bad = await runBin(['run', '--target', sim.base, '--endpoint', 'vector-search', '--vector-data', corpusPath,
    '--vector-queries', queriesPath, '--vector-truth', truthPath, '--vector-api', `@${wrong}`,
    '--requests', '5', '--concurrency', '1', '--out', path.join(tmp, 'tpl-bad'), '-q'], { timeoutMs: 60000 });
  const res = JSON.parse(fs.readFileSync(path.join(tmp, 'tpl-bad', 'result.json'), 'utf8'));
  assert.equal(res.outcomes.malformed, 5, JSON.stringify(res.outcomes) + bad.stderr);
  assert.match(JSON.stringify(res.errors), /expected an array of hits at \/hits/);
  const unknown = await runBin(['run', '--target', sim.base, '--endpoint', 'vector-search',
    '--vector-data', corpusPath, '--vector-queries', queriesPath, '--vector-api', 'pinecone',
    '--requests', '1', '--out', path.join(tmp, 'tpl-unknown'), '-q'], { timeoutMs: 60000 });
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /--vector-api: expected tokenstorm, qdrant, milvus, chroma or @FILE/);
});

test('--vector-index without --vector-data indexes the text store: same ranking as the exact scan', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const sims = [];
  try {
    const exact = await startSim(['--profile', 'tiny', '--vector-latency', '0']);
    sims.push(exact);
    const flat = await startSim(['--profile', 'tiny', '--vector-index', 'Flat']);
    sims.push(flat);
    const ivf = await startSim(['--profile', 'tiny', '--vector-index', 'IVF8,Flat'], { timeoutMs: 60000 });
    sims.push(ivf);
    const ask = (s, extra = {}) => postJson(s.base, '/v1/vector_stores/vs_default/search',
      { query: 'How do volcanoes erupt and what is lava?', max_num_results: 8, ...extra });
    const want = (await ask(exact)).json.data;
    assert.equal(want.length, 8);
    const same = (got) => {
      assert.deepEqual(got.map((h) => h.file_id), want.map((h) => h.file_id));
      got.forEach((h, i) => assert.ok(Math.abs(h.score - want[i].score) < 2e-4, `${h.score} ${want[i].score}`));
    };
    same((await ask(flat)).json.data);
    same((await ask(ivf, { nprobe: 8 })).json.data); // every list: exact
    const one = await ask(ivf, { nprobe: 1 });
    assert.equal(one.status, 200);
    assert.ok(one.json.data.length <= 8);
    const bad = await ask(ivf, { nprobe: -3 });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, 'nprobe');
    // an index FAISS cannot train on 200 passages is refused at start, naming the option
    await assert.rejects(startSim(['--profile', 'tiny', '--vector-index', 'IVF4096,Flat'], { timeoutMs: 60000 }),
      /--vector-index 'IVF4096,Flat' over 200 passages/);
  } finally {
    for (const s of sims) await s.stop();
  }
});
