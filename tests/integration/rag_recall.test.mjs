// A RAG flow's retrieval step under load, against the simulator's real FAISS
// index over its text vector store: recall@k of each search (judged by
// tokenstorm against the exact ranking) next to the quality of the answer it
// led to. The simulator answers a passage with that passage's answer
// (--answers), and each question's reference is the answer of its true best
// passage, taken from a second simulator without an index (exact ranking):
// so an answer is right exactly when the search found the true best passage.
// With nprobe 1 recall@3 is below 1 and answers go wrong; with every list
// probed recall is 1 and the answers match. This test computes the expected
// recall itself from both simulators' own answers. Skipped when the build
// has no FAISS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, postJson, rng } from './lib.mjs';

const NDOCS = 400, NQ = 40, K = 3, NLIST = 16;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-ragrecall-'));
const WORDS = ['amber', 'basalt', 'cobalt', 'delta', 'ember', 'fjord', 'garnet', 'harbor', 'indigo',
  'juniper', 'kelp', 'lagoon', 'meadow', 'nectar', 'onyx', 'prairie', 'quartz', 'river', 'saffron',
  'tundra', 'umber', 'valley', 'willow', 'xenon', 'yarrow', 'zephyr', 'anchor', 'beacon', 'canyon', 'dune'];
let exact = null, ivf = null, faiss = true;
const questions = [];

function pick(r, n) {
  const w = [...WORDS];
  const out = [];
  for (let i = 0; i < n; i++) out.push(w.splice(Math.floor(r() * w.length), 1)[0]);
  return out;
}

async function search(sim, query, extra = {}) {
  const r = await postJson(sim.base, '/v1/vector_stores/vs_default/search',
    { query, max_num_results: K, ...extra });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json.data;
}

before(async () => {
  const r = rng(11);
  const docs = [], answers = [];
  for (let i = 0; i < NDOCS; i++) {
    const w = pick(r, 4);
    const text = `Passage ${i} tells of the ${w[0]} and the ${w[1]}, near the ${w[2]} by the ${w[3]}.`;
    docs.push(JSON.stringify({ id: `doc-${i}`, text }));
    answers.push(JSON.stringify({ prompt: text, answer: `From passage ${i}: ${w.join(' ')}.` }));
  }
  fs.writeFileSync(path.join(tmp, 'docs.jsonl'), docs.join('\n') + '\n');
  fs.writeFileSync(path.join(tmp, 'answers.jsonl'), answers.join('\n') + '\n');
  for (let q = 0; q < NQ; q++) {
    const w = pick(r, 3);
    questions.push(`What about the ${w[0]} and the ${w[1]} by the ${w[2]}?`);
  }
  const docsArg = ['--profile', 'tiny', '--vector-docs', path.join(tmp, 'docs.jsonl')];
  exact = await startSim(docsArg);
  try {
    ivf = await startSim([...docsArg, '--answers', path.join(tmp, 'answers.jsonl'),
      '--vector-index', `IVF${NLIST},Flat`], { timeoutMs: 60000 });
  } catch (e) {
    if (!/no FAISS/.test(String(e))) throw e;
    faiss = false;
    return;
  }
  // each question's reference: the answer of its true best passage
  const byText = new Map(answers.map((l) => JSON.parse(l)).map((a) => [a.prompt, a.answer]));
  const lines = [];
  for (const q of questions) {
    const top = (await search(exact, q))[0].content[0].text;
    lines.push(JSON.stringify({ prompt: q, reference: byText.get(top) }));
  }
  fs.writeFileSync(path.join(tmp, 'questions.jsonl'), lines.join('\n') + '\n');
});

after(async () => {
  if (exact) await exact.stop();
  if (ivf) await ivf.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// The mean recall@K of the indexed simulator's answers at nprobe, by this test
// (true neighbours: the exact simulator's top K).
async function expectedRecall(nprobe) {
  let sum = 0;
  for (const q of questions) {
    const truth = new Set((await search(exact, q)).map((h) => h.file_id));
    const got = (await search(ivf, q, { nprobe })).map((h) => h.file_id);
    sum += got.filter((id) => truth.has(id)).length / K;
  }
  return sum / NQ;
}

function scenario(nprobe) {
  return `name: rag-recall
seed: 1
requests: ${NQ}
target: {url: ${ivf.base}/v1}
classes:
  - name: rag
    users: 2
    prompts_file: questions.jsonl
    flow:
      steps:
        - name: search
          kind: http
          url: "{{target}}/vector_stores/vs_default/search"
          body: {query: "{{prompt}}", max_num_results: ${K}, nprobe: ${nprobe}}
          capture: {passage: /data/0/content/0/text}
          retrieval: {docs: docs.jsonl}
        - name: generate
          kind: chat
          depends_on: [search]
          body:
            messages: [{role: user, content: "{{passage}}"}]
            max_tokens: 32
`;
}

async function runAt(nprobe) {
  const file = path.join(tmp, `rag${nprobe}.yaml`);
  fs.writeFileSync(file, scenario(nprobe));
  const out = path.join(tmp, `out${nprobe}`);
  const r = await runBin(['run', file, '--out', out], { timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stderr + r.stdout);
  const res = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  const steps = Object.fromEntries(res.classes[0].steps.map((s) => [s.name, s]));
  return { r, res, out, steps, retr: steps.search.retrieval };
}

test('a retrieval step reports recall@k next to the quality of the answers it led to', async (t) => {
  if (!faiss) return t.skip('no FAISS in this build');
  const lo = await runAt(1);
  const hi = await runAt(NLIST);
  const want1 = await expectedRecall(1);
  assert.ok(want1 < 0.9, `nprobe 1 recall ${want1} should be approximate`);

  for (const [run, want] of [[lo, want1], [hi, 1]]) {
    const v = run.retr;
    assert.ok(v, 'steps[search].retrieval');
    assert.equal(v.k, K);
    assert.equal(v.searches, NQ);
    // ties with the k-th true passage count as hits: at most a hair above this test's count
    assert.ok(v.recall_mean >= want - 1e-9 && v.recall_mean <= want + 0.05,
      `recall ${v.recall_mean}, expected ${want}`);
    assert.ok(v.recall_min <= v.recall_p5 && v.recall_p5 <= v.recall_p50);
    assert.deepEqual(v.answer_steps, ['generate']);
    assert.equal(v.answers, NQ);
    assert.equal(v.quality.with_reference, NQ);
    // by recall: the searches and answers add up, best first
    const rows = v.by_recall;
    assert.equal(rows.reduce((a, b) => a + b.searches, 0), NQ);
    assert.equal(rows.reduce((a, b) => a + b.answers, 0), NQ);
    for (let i = 1; i < rows.length; i++) assert.ok(rows[i].recall < rows[i - 1].recall);
    const mean = rows.reduce((a, b) => a + b.recall * b.searches, 0) / NQ;
    assert.ok(Math.abs(mean - v.recall_mean) < 1e-9);
    // the recall is the retrieval step's: not the class's nor the run's
    assert.equal(run.res.classes[0].vector_search, undefined);
    assert.equal(run.res.vector_search, undefined);
    assert.equal(run.steps.search.vector_search.searches, NQ);
    // the answers were scored: the run's quality counts the answer steps only
    assert.equal(run.res.quality.with_reference, NQ);
  }
  // full recall: the true best passage, hence the reference answer (a tie for first may differ)
  assert.equal(hi.retr.recall_p5, 1);
  assert.ok(hi.retr.quality.exact_match_rate >= 0.9, `exact ${hi.retr.quality.exact_match_rate}`);
  // low recall: the answers it led to are worse
  assert.ok(lo.retr.recall_p5 < 1);
  assert.ok(lo.retr.quality.exact_match_rate < hi.retr.quality.exact_match_rate - 0.1,
    `exact match ${lo.retr.quality.exact_match_rate} (nprobe 1) vs ${hi.retr.quality.exact_match_rate}`);
  assert.ok(lo.retr.quality.rouge_l.mean < hi.retr.quality.rouge_l.mean);
  const zero = lo.retr.by_recall.find((b) => b.hits === 0);
  if (zero) assert.equal(zero.exact_match_rate, 0, 'no true passage found: no right answer');
  t.diagnostic(`recall@${K}: nprobe 1 ${lo.retr.recall_mean.toFixed(3)} (exact match ${lo.retr.quality.exact_match_rate.toFixed(3)}), ` +
    `nprobe ${NLIST} ${hi.retr.recall_mean} (exact match ${hi.retr.quality.exact_match_rate.toFixed(3)})`);

  // the console's table, and the HTML report's
  assert.match(lo.r.stdout, /retrieval steps: recall@k/);
  assert.match(lo.r.stdout, new RegExp(`rag/search +${K} +${NQ} +${lo.retr.recall_mean.toFixed(3)}`));
  assert.match(lo.r.stdout, /\n {2}recall 1\.000 \(3\/3\)|\n {2}recall 0\.667 \(2\/3\)/);
  const html = path.join(tmp, 'r.html');
  const rep = await runBin(['report', '--format', 'html', '-o', html, lo.out]);
  assert.equal(rep.code, 0, rep.stderr);
  const page = fs.readFileSync(html, 'utf8');
  assert.match(page, /Retrieval steps: recall@k and the answers it led to/);
  assert.match(page, new RegExp(`<td>rag/search \\(k ${K}\\)</td><td>${NQ}</td><td>${lo.retr.recall_mean.toFixed(3)}</td>`));
});

test('retrieval is refused on a step that is not an HTTP search; a missing docs file is named', async () => {
  const file = path.join(tmp, 'bad.yaml');
  fs.writeFileSync(file, `classes:
  - name: rag
    users: 1
    flow:
      steps:
        - {name: generate, kind: chat, retrieval: true, body: {messages: [{role: user, content: hi}]}}
`);
  const r = await runBin(['run', '--check', file]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /bad\.yaml:6:\d+: step 'generate': retrieval is for a kind: http step/);
  fs.writeFileSync(file, `classes:
  - name: rag
    users: 1
    flow:
      steps:
        - {name: s, kind: http, url: "{{target}}/vector_stores/v/search", body: {query: "{{prompt}}"},
           retrieval: {docs: nothere.jsonl}}
`);
  const m = await runBin(['run', file, '--requests', '1', '--out', path.join(tmp, 'm')]);
  assert.equal(m.code, 2, m.stderr);
  assert.match(m.stderr, /class 'rag': step 's': retrieval: .*nothere\.jsonl: No such file/);
});
