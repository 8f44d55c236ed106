// `tokenstorm topology --source`: the embedded Python scan of the fixture
// RAG + agent app (tests/fixtures/topology/ragapp) against its expected
// graph, node by node and edge by edge; the resilience settings read from
// the code; the unparseable file reported as FILE:LINE; nothing of the
// scanned tree executed; outputs in every format; errors and exit codes.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { runBin, startSim, startServer } from './lib.mjs';

const fixtures = new URL('../fixtures/topology/', import.meta.url).pathname;
const app = path.join(fixtures, 'ragapp');
const expected = JSON.parse(fs.readFileSync(path.join(fixtures, 'ragapp.expected.json'), 'utf8'));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-topo-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// The environment without the variables the fixture's URLs name.
function env(extra = {}) {
  const e = { ...process.env };
  for (const k of ['LLM_BASE_URL', 'WEATHER_URL', 'TOKENSTORM_PYTHON']) delete e[k];
  return { ...e, ...extra };
}

const byId = (doc) => Object.fromEntries(doc.nodes.map((n) => [n.id, n]));

test('the fixture app gives its expected graph, node by node', async () => {
  const r = await runBin(['topology', '--source', app, '--format', 'json'], { env: env() });
  assert.equal(r.code, 0, r.stderr);
  const doc = JSON.parse(r.stdout);
  assert.equal(doc.tokenstorm_topology, 1);
  assert.equal(doc.sources.files, 8);
  assert.deepEqual(doc.nodes.map((n) => [n.id, n.kind, n.layer]).sort(), expected.nodes);
  assert.deepEqual(doc.edges.map((e) => [e.from, e.to, e.kind]).sort(), expected.edges);
  assert.deepEqual(doc.flags.map((f) => [f.kind, f.node]).sort(), expected.flags);
  for (const n of doc.nodes) assert.equal(n.origin, 'code', n.id);

  const n = byId(doc);
  const llm = n['chat_model:app.llm.llm'];
  assert.equal(llm.class, 'ChatOpenAI');
  assert.deepEqual(llm.models, ['tiny-chat']);
  assert.equal(llm.base_url, 'http://127.0.0.1:8000/v1'); // the os.getenv default
  assert.equal(llm.timeout_ms, 800);
  assert.equal(llm.max_retries, 3);
  assert.equal(llm.file, 'app/llm.py');
  assert.equal(llm.line, 6);
  const client = n['llm_client:app.direct.client'];
  assert.deepEqual(client.models, ['tiny-chat', 'tiny-embed']);
  assert.equal(client.timeout_ms, 30000); // httpx.Timeout(30.0, connect=2.0)
  assert.equal(client.max_retries, 2);
  assert.equal(n['function:app.tools.weather'].retry_lib, 'tenacity');
  assert.equal(n['function:app.tools.weather'].retry_attempts, 3);
  assert.equal(n['function:app.tools.search_kb'].label, 'kb_search');
  assert.equal(n['function:app.tools.search_kb'].retry_lib, 'backoff');
  assert.equal(n['function:app.tools.search_kb'].retry_attempts, 4);
  assert.equal(n['agent:app.agent.executor'].retry_attempts, 2); // .with_retry(stop_after_attempt=2)
  assert.equal(n['vector_store:app.rag.vectorstore'].system, 'faiss');
  assert.equal(n['function:app.server.ask'].route, 'POST /ask');
  assert.equal(n['function:app.rag.answer_stream'].streaming, true);
  const kb = doc.edges.find((e) => e.from === 'function:app.tools.search_kb');
  assert.equal(kb.timeout_ms, 2500);
  assert.equal(kb.method, 'POST');
  const weather = doc.edges.find((e) => e.from === 'function:app.tools.weather');
  assert.equal(weather.timeout_missing, true);
  const amp = doc.flags.find((f) => f.kind === 'retry_amplification');
  assert.equal(amp.value, 8); // executor 2 attempts x ChatOpenAI 1 + 3 retries
  assert.match(amp.message, /agent_route -> run_agent -> executor -> agent -> llm/);

  // the unparseable file: reported with file and line, on stderr and in the JSON
  assert.deepEqual(doc.sources.scan_errors.map((e) => [e.file, e.line]), expected.scan_errors);
  assert.match(r.stderr, /broken\/half_written\.py:5: invalid syntax/);
  // the API key written in the code is not copied anywhere
  assert.doesNotMatch(r.stdout, /sk-not-a-secret/);
});

test('configured URLs take the environment at the time of the scan', async () => {
  const r = await runBin(['topology', '--source', app, '--format', 'json'],
    { env: env({ LLM_BASE_URL: 'http://127.0.0.1:1234/v1' }) });
  assert.equal(r.code, 0, r.stderr);
  const n = byId(JSON.parse(r.stdout));
  assert.equal(n['chat_model:app.llm.llm'].base_url, 'http://127.0.0.1:1234/v1');
  const search = n['http:${LLM_BASE_URL:-http://127.0.0.1:8000/v1}/vector_stores/vs_default/search'];
  assert.equal(search.url, 'http://127.0.0.1:1234/v1/vector_stores/vs_default/search');
});

test('nothing of the scanned tree is executed or imported', async () => {
  const dir = path.join(tmp, 'evil');
  const marker = path.join(tmp, 'executed');
  fs.mkdirSync(dir, { recursive: true });
  const payload = `open(${JSON.stringify(marker)}, "w").write("x")\n`;
  // a module that runs code when imported, and modules named like the
  // standard library that the scan itself would import if sys.path held them
  fs.writeFileSync(path.join(dir, 'main.py'), payload + 'from openai import OpenAI\nc = OpenAI(timeout=5)\n');
  for (const m of ['ast.py', 'json.py', 'os.py', 'sitecustomize.py']) fs.writeFileSync(path.join(dir, m), payload);
  const r = await runBin(['topology', '--source', dir, '--format', 'json'], { env: env(), cwd: dir });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(fs.existsSync(marker), false, 'a file of the scanned tree was executed');
  const doc = JSON.parse(r.stdout);
  assert.equal(doc.sources.files, 5);
});

test('--out writes JSON, DOT and Mermaid', async () => {
  const out = path.join(tmp, 'out');
  const r = await runBin(['topology', '--source', app, '--out', out], { env: env() });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^topology: 22 nodes/);
  assert.match(r.stdout, /risk \[high\] retry_amplification/);
  const json = JSON.parse(fs.readFileSync(path.join(out, 'topology.json'), 'utf8'));
  const dot = fs.readFileSync(path.join(out, 'topology.dot'), 'utf8');
  const mmd = fs.readFileSync(path.join(out, 'topology.mmd'), 'utf8');
  assert.match(dot, /^digraph topology \{/);
  assert.equal((dot.match(/ -> /g) || []).length, json.edges.length);
  assert.equal((dot.match(/^ {2}n\d+ \[label=/gm) || []).length, json.nodes.length);
  assert.match(mmd, /^flowchart LR/);
  assert.equal((mmd.match(/^ {2}n\d+\["/gm) || []).length, json.nodes.length);
  assert.equal((mmd.match(/ (-->|-\.->)\|/g) || []).length, json.edges.length);
  // the picture: well-formed SVG (python3's XML parser), a box per node filled
  // with its layer's colour, a curve per edge (code-only ones dashed)
  const svg = fs.readFileSync(path.join(out, 'topology.svg'), 'utf8');
  const xml = spawnSync('python3', ['-c', 'import sys,xml.etree.ElementTree as E; E.parse(sys.argv[1])', path.join(out, 'topology.svg')]);
  assert.equal(xml.status, 0, String(xml.stderr));
  const colours = { gateway: '#4e79a7', model: '#e15759', vector: '#59a14f', infrastructure: '#9c755f' };
  for (const n of json.nodes) {
    assert.ok(svg.includes(`<g class="node ${n.layer}"><rect`), n.id);
    assert.ok(new RegExp(`<g class="node ${n.layer}"><rect [^>]*fill="${colours[n.layer]}"`).test(svg), n.layer);
  }
  assert.equal((svg.match(/<g class="node /g) || []).length, json.nodes.length);
  assert.equal((svg.match(/<path class="edge"/g) || []).length, json.edges.length);
  assert.equal((svg.match(/<path class="edge"[^>]*stroke-dasharray/g) || []).length, json.edges.length);
  const html = fs.readFileSync(path.join(out, 'topology.html'), 'utf8');
  assert.match(html, /^<!DOCTYPE html>/);
  assert.ok(html.includes('<svg class="ts-topology"'));
  assert.match(html, new RegExp(`<h2>Risks \\(${json.flags.length}\\)</h2>`));
  assert.doesNotMatch(html, /<script|https?:\/\/(?!127\.0\.0\.1)/);
  // no unescaped quote or bracket from a label breaks the Mermaid syntax
  for (const line of mmd.split('\n').filter((l) => /^ {2}n\d+\["/.test(l))) {
    assert.match(line, /^ {2}n\d+\["[^"[\]{}]*"\]:::(gateway|model|vector|infrastructure)$/);
  }
});

test('errors: no source, a missing directory, no python3, a bad option', async () => {
  let r = await runBin(['topology'], { env: env() });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /give --source, --traces or --otlp-listen/);
  r = await runBin(['topology', '--source', path.join(tmp, 'nope')], { env: env() });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /not a directory/);
  r = await runBin(['topology', '--source', app, '--python', path.join(tmp, 'no-python')], { env: env() });
  assert.equal(r.code, 3);
  assert.match(r.stderr, /cannot run .*no-python/);
  r = await runBin(['topology', '--source', app, '--format', 'png'], { env: env() });
  assert.equal(r.code, 2);
  r = await runBin(['topology', '--source', app, '--save-traces', 'x.jsonl'], { env: env() });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /need --otlp-listen/);
});

test("tokenstorm's own spans feed it: run --otlp-endpoint through the proxy's SERVER spans", async () => {
  const sim = await startSim(['--profile', 'tiny', '--no-noise']);
  const topo = await startServer(['topology', '--otlp-listen', '127.0.0.1:0', '--until-spans', '12',
    '--listen-for', '60s', '--format', 'json']);
  const proxy = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0',
    '--api', '127.0.0.1:0', '--otlp-endpoint', topo.base, '--otlp-all']);
  try {
    const env = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('OTEL_')) delete env[k];
    const r = await runBin(['run', '--target', `${proxy.base}/v1`, '--requests', '6', '--rate', '20',
      '--otlp-endpoint', topo.base, '--quiet', '--out', path.join(tmp, 'run-otlp')], { env });
    assert.equal(r.code, 0, r.stderr);
    const exit = await topo.waitExit();
    assert.equal(exit.code, 0, topo.stderr);
    const doc = JSON.parse(topo.output.slice(topo.output.indexOf('{')));
    assert.equal(doc.sources.spans, 12);
    assert.equal(doc.sources.traces, 6);
    // the load's CLIENT spans -> the proxy's SERVER spans (their children), in the model layer
    assert.equal(doc.edges.length, 1);
    const [e] = doc.edges;
    const to = doc.nodes.find((n) => n.id === e.to);
    assert.match(to.id, /^op:.*tokenstorm\.proxy POST \/v1\/chat\/completions$/);
    assert.equal(to.layer, 'model');
    assert.equal(e.calls, 6);
    assert.equal(e.errors, 0);
    assert.ok(e.p99_ms > 0);
  } finally {
    await proxy.stop('SIGKILL');
    await sim.stop('SIGKILL');
    await topo.stop('SIGKILL');
  }
});
