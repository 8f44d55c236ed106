// Text queries for vector search (--vector-queries text:FILE, and
// queries: text:FILE in a scenario's vector block): tokenstorm embeds the
// texts through the target's POST /v1/embeddings, searches the vectors it got,
// and measures recall@k against the exact neighbours of those vectors. The
// corpus is the simulator's own embeddings of passages (the test asks for
// them), so the search is meaningful; the recall tokenstorm reports must be
// the one this test computes from the same embeddings, the simulator's
// answers and a brute force. Skipped when the build has no FAISS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, postJson } from './lib.mjs';

const NDOC = 300, NQ = 70, K = 1;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-vectext-'));
let sim = null;
let faiss = true;
let dim = 0;
let corpus; // Float32Array NDOC x dim
// passages of 5 words from 997 (all different)
const W = 997;
const word = (k) => `w${(k % W) * 7919 % 100003}`;
const doc = (i) => [1, 2, 3, 4, 5].map((j) => word(i * 31 + j * j * 17 + i * j * 5)).join(' ');
// query q is passage 3q with one word more: its nearest neighbour is that
// passage, by far (5 shared words against a few), so recall@1 needs no tie rule
const queryText = (q) => `${doc(3 * q)} ${word(q * 13 + 7)}`;

async function embed(base, texts) {
  const out = [];
  for (let i = 0; i < texts.length; i += 50) {
    const r = await postJson(base, '/v1/embeddings', { model: 'tokenstorm/tiny', input: texts.slice(i, i + 50) });
    assert.equal(r.status, 200, r.text);
    for (const e of r.json.data) out.push(Float32Array.from(e.embedding));
  }
  return out;
}

before(async () => {
  // any simulator embeds alike: the first one gives the corpus for the second
  const plain = await startSim(['--profile', 'tiny']);
  let docs;
  try {
    docs = await embed(plain.base, Array.from({ length: NDOC }, (_, i) => doc(i)));
  } finally {
    await plain.stop();
  }
  dim = docs[0].length;
  corpus = new Float32Array(NDOC * dim);
  const buf = Buffer.alloc(NDOC * (dim + 1) * 4);
  docs.forEach((v, i) => {
    corpus.set(v, i * dim);
    buf.writeInt32LE(dim, i * (dim + 1) * 4);
    v.forEach((x, d) => buf.writeFloatLE(x, i * (dim + 1) * 4 + 4 + d * 4));
  });
  fs.writeFileSync(path.join(tmp, 'corpus.fvecs'), buf);
  fs.writeFileSync(path.join(tmp, 'queries.jsonl'),
    Array.from({ length: NQ }, (_, q) => JSON.stringify({ prompt: queryText(q) })).join('\n') + '\n');
  try {
    sim = await startSim(['--profile', 'tiny', '--vector-data', path.join(tmp, 'corpus.fvecs'),
      '--vector-index', 'IVF16,Flat'], { timeoutMs: 60000 });
  } catch (e) {
    if (!/no FAISS/.test(String(e))) throw e;
    faiss = false;
  }
});

after(async () => {
  if (sim) await sim.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// The test's own recall@K of the simulator's answers at nprobe, for the texts' embeddings.
async function expectedRecall(nprobe) {
  const qs = await embed(sim.base, Array.from({ length: NQ }, (_, q) => queryText(q)));
  let sum = 0;
  for (const [q, qv] of qs.entries()) {
    const d = [];
    for (let i = 0; i < NDOC; i++) {
      let s = 0;
      for (let j = 0; j < dim; j++) {
        const t = qv[j] - corpus[i * dim + j];
        s += t * t;
      }
      d.push([s, i]);
    }
    d.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const truth = d.slice(0, K).map((x) => x[1]);
    assert.equal(truth[0], 3 * q, `query ${q}: its passage is the nearest`);
    assert.ok(d[1][0] - d[0][0] > 1e-3, `query ${q}: no near tie`);
    const r = await postJson(sim.base, '/v1/vectors/search', { vector: Array.from(qv), k: K, nprobe });
    assert.equal(r.status, 200);
    const got = new Set(r.json.data.map((h) => h.id));
    sum += truth.filter((id) => got.has(id)).length / K;
  }
  return sum / NQ;
}

test('run --vector-queries text:FILE embeds through the target, then measures recall@k', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const out = path.join(tmp, 'run');
  const r = await runBin(['run', '--target', sim.base, '--endpoint', 'vector-search',
    '--vector-data', path.join(tmp, 'corpus.fvecs'), '--vector-queries', `text:${path.join(tmp, 'queries.jsonl')}`,
    '--vector-k', String(K), '--nprobe', '1', '--concurrency', '1', '--requests', String(NQ), '--out', out, '-q'],
  { timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stderr);
  const res = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  const want = await expectedRecall(1);
  t.diagnostic(`recall@${K} of ${NQ} embedded texts at nprobe 1: ${res.vector_search.recall_mean} (test: ${want})`);
  assert.equal(res.vector_search.searches, NQ);
  assert.ok(Math.abs(res.vector_search.recall_mean - want) < 1e-9, `${res.vector_search.recall_mean} vs ${want}`);
  assert.ok(want < 1, 'nprobe 1 of 16 lists should miss some neighbours');
  const emb = res.run.vector.embedded;
  assert.equal(emb.texts, NQ);
  assert.equal(emb.requests, Math.ceil(NQ / 64)); // batches of 64 texts
  assert.match(emb.url, /\/v1\/embeddings$/);
  assert.equal(res.run.vector.query_count, NQ);
});

test('a scenario class with text queries, next to one with every list probed', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const file = path.join(tmp, 's.yaml');
  fs.writeFileSync(file, `target: {url: ${sim.base}/v1}
duration: 60s
classes:
  - name: narrow
    endpoint: vector-search
    users: 1
    requests: ${NQ}
    vector: {data: corpus.fvecs, queries: "text:queries.jsonl", k: ${K}, nprobe: 1}
  - name: exact
    endpoint: vector-search
    users: 1
    requests: ${NQ}
    vector: {data: corpus.fvecs, queries: "text:queries.jsonl", k: ${K}, nprobe: 16}
`);
  const chk = await runBin(['run', '--check', file]);
  assert.equal(chk.code, 0, chk.stderr);
  const out = path.join(tmp, 'scn');
  const r = await runBin(['run', file, '--out', out, '-q'], { timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stderr);
  const res = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  const [narrow, exact] = res.classes;
  const want = await expectedRecall(1);
  assert.ok(Math.abs(narrow.vector_search.recall_mean - want) < 1e-9, `${narrow.vector_search.recall_mean} vs ${want}`);
  assert.equal(exact.vector_search.recall_mean, 1); // every list probed
  assert.equal(exact.vector_search.searches, NQ);
});

test('text queries: errors name the file line, the URL and what the server said', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const bad = path.join(tmp, 'bad.jsonl');
  fs.writeFileSync(bad, '{"prompt":"ok"}\n{"messages":[{"role":"user","content":"x"}]}\n');
  const common = ['run', '--endpoint', 'vector-search', '--vector-data', path.join(tmp, 'corpus.fvecs'),
    '--requests', '2', '-q'];
  const r1 = await runBin([...common, '--target', sim.base, '--vector-queries', `text:${bad}`, '--out', path.join(tmp, 'e1')]);
  assert.equal(r1.code, 2);
  assert.match(r1.stderr, /--vector-queries: .*bad\.jsonl:2/);
  // a corpus of another dimension than the target's embeddings
  const r2 = await runBin([...common.slice(0, 3), '--vector-data', 'gen:100x8', '--requests', '2', '-q',
    '--target', sim.base, '--vector-queries', `text:${path.join(tmp, 'queries.jsonl')}`, '--out', path.join(tmp, 'e2')]);
  assert.equal(r2.code, 2);
  assert.match(r2.stderr, new RegExp(`${dim} dimensions \\(the target's embeddings\\) against a corpus of 100 x 8`));
  // a target whose embeddings endpoint refuses: its status and message
  const r3 = await runBin([...common, '--target', sim.base, '--model', 'nosuch',
    '--vector-queries', `text:${path.join(tmp, 'queries.jsonl')}`, '--out', path.join(tmp, 'e3')]);
  assert.equal(r3.code, 2);
  assert.match(r3.stderr, /POST http:\/\/127\.0\.0\.1:\d+\/v1\/embeddings \(texts 1 to 64\): HTTP 404: The model `nosuch` does not exist/);
  // a PostgreSQL target has no embeddings endpoint next to it
  const r4 = await runBin(['run', '--endpoint', 'vector-search', '--target', 'postgresql://127.0.0.1:9/x',
    '--vector-queries', `text:${path.join(tmp, 'queries.jsonl')}`, '--requests', '1', '-q', '--out', path.join(tmp, 'e4')]);
  assert.equal(r4.code, 2);
  assert.match(r4.stderr, /text queries need a target with an embeddings endpoint/);
});
