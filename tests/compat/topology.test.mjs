// `tokenstorm topology` with traces from the real OpenTelemetry npm SDK:
// otel_app.mjs (sdk-trace-node + exporter-trace-otlp-http, pinned in
// package.json) calls the simulator's embeddings, vector search and chat
// endpoints and exports its spans, gzipped, to `topology --otlp-listen`,
// which also scans the fixture app's source and saves what it received. The
// merged graph is checked node by node; then the saved file is read back with
// --traces and must give the same traced numbers; then a protobuf export is
// refused with 415.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startSim, startServer, runBin } from '../integration/lib.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const app = path.join(here, '../fixtures/topology/ragapp');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-topo-otel-'));
const ITER = 8;
let sim;
let weatherUrl;

// A loopback port with nobody listening (the weather service that is down).
async function closedPort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

function runApp(args, timeoutMs = 60000) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [path.join(here, 'otel_app.mjs'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, out }); });
  });
}

before(async () => {
  sim = await startSim(['--any-model', '--no-noise']);
  weatherUrl = `http://127.0.0.1:${await closedPort()}/weather`;
  // startServer passes this process's environment: the fixture's configured URLs
  process.env.LLM_BASE_URL = `${sim.base}/v1`;
  process.env.WEATHER_URL = weatherUrl;
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const env = () => ({ ...process.env, LLM_BASE_URL: `${sim.base}/v1`, WEATHER_URL: weatherUrl });
const byId = (doc) => Object.fromEntries(doc.nodes.map((n) => [n.id, n]));
const edge = (doc, from, to) => doc.edges.find((e) => e.from === from && e.to === to);

function checkGraph(doc) {
  const n = byId(doc);
  const spans = ITER * 9;
  assert.equal(doc.sources.spans, spans);
  assert.equal(doc.sources.traces, ITER * 2);
  // code and traces matched: model names, routes, class names, tool names, URLs
  const llm = n['chat_model:app.llm.llm'];
  assert.equal(llm.origin, 'both');
  assert.equal(llm.calls, ITER * 2);
  assert.equal(llm.errors, 0);
  assert.ok(llm.p50_ms > 0 && llm.p99_ms >= llm.p50_ms, JSON.stringify(llm));
  assert.equal(n['embeddings:app.llm.embeddings'].origin, 'both');
  assert.equal(n['embeddings:app.llm.embeddings'].calls, ITER);
  assert.equal(n['function:app.server.ask'].origin, 'both');
  assert.equal(n['function:app.server.ask'].calls, ITER);
  assert.equal(n['function:app.server.agent_route'].origin, 'both');
  assert.equal(n['retriever:app.rag.retriever'].origin, 'both');
  assert.equal(n['function:app.tools.weather'].origin, 'both');
  const search = n['http:${LLM_BASE_URL:-http://127.0.0.1:8000/v1}/vector_stores/vs_default/search'];
  assert.equal(search.origin, 'both');
  assert.equal(search.layer, 'vector');
  assert.equal(search.calls, ITER);
  const weather = n['http:${WEATHER_URL:-http://127.0.0.1:9300/weather}'];
  assert.equal(weather.origin, 'both');
  assert.equal(weather.error_rate, 1);
  // code-only stays code-only; nothing traced is left unmatched in this app
  assert.equal(n['llm_client:app.direct.client'].origin, 'code');
  assert.deepEqual(doc.nodes.filter((x) => x.origin === 'traced').map((x) => x.id), []);
  // traced edges, with counts, latency and critical-path share
  const askLlm = edge(doc, 'function:app.server.ask', 'chat_model:app.llm.llm');
  assert.equal(askLlm.origin, 'traced');
  assert.equal(askLlm.calls, ITER);
  assert.ok(askLlm.critical_path_share > 0.2 && askLlm.critical_path_share <= 1, JSON.stringify(askLlm));
  const toolHttp = edge(doc, 'function:app.tools.weather', 'http:${WEATHER_URL:-http://127.0.0.1:9300/weather}');
  assert.equal(toolHttp.origin, 'both');
  assert.equal(toolHttp.error_rate, 1);
  assert.equal(edge(doc, 'retriever:app.rag.retriever', 'embeddings:app.llm.embeddings').calls, ITER);
  // layers
  assert.equal(llm.layer, 'model');
  assert.equal(n['function:app.server.ask'].layer, 'gateway');
  assert.equal(n['retriever:app.rag.retriever'].layer, 'vector');
  assert.equal(weather.layer, 'infrastructure');
  // the gateway's 800 ms timeout against the model's traced p99 (100 tokens at ~10 ms)
  const slow = doc.flags.find((f) => f.kind === 'timeout_below_p99' && f.node === 'chat_model:app.llm.llm');
  assert.ok(llm.p99_ms > 800, `p99 ${llm.p99_ms} ms`);
  assert.ok(slow, JSON.stringify(doc.flags));
  assert.match(slow.message, /llm \(app\/llm\.py:6\) times out after 800 ms, below the traced p99 of \d+ ms/);
  return doc;
}

test('live OTLP/HTTP (gzip) from the npm SDK, merged with the source scan', async () => {
  const out = path.join(tmp, 'live');
  const saved = path.join(tmp, 'saved.jsonl');
  const topo = await startServer(['topology', '--source', app, '--otlp-listen', '127.0.0.1:0',
    '--until-spans', String(ITER * 9), '--listen-for', '90s', '--save-traces', saved, '--out', out], 10000);
  // startServer runs with this process's env: the URLs are matched from the spans' side too
  const r = await runApp([sim.base, `${topo.base}/v1/traces`, weatherUrl, String(ITER), 'gzip']);
  assert.equal(r.code, 0, r.out);
  const exit = await topo.waitExit();
  assert.equal(exit.code, 0, topo.stderr);
  assert.match(topo.stderr, /received \d+ exports, 72 spans \(0 refused\)/);
  // the picture labels traced edges with their p99 and weights them by calls
  const svg = fs.readFileSync(path.join(out, 'topology.svg'), 'utf8');
  assert.match(svg, /<text class="elabel"[^>]*>p99 \d+ ms<\/text>/);
  assert.match(svg, /stroke="#d62728" stroke-width="2\.9"/); // the failing weather calls: 8 calls
  const doc = JSON.parse(fs.readFileSync(path.join(out, 'topology.json'), 'utf8'));
  global.liveDoc = checkGraph(doc);
  global.saved = saved;
});

test('the saved traces read back from a file give the same graph', async () => {
  assert.ok(global.saved, 'the live test ran first');
  const r = await runBin(['topology', '--source', app, '--traces', global.saved, '--format', 'json'], { env: env() });
  assert.equal(r.code, 0, r.stderr);
  const doc = checkGraph(JSON.parse(r.stdout));
  const strip = (d) => d.nodes.map((x) => [x.id, x.origin, x.calls, x.errors]);
  assert.deepEqual(strip(doc), strip(global.liveDoc));
});

test('a protobuf export is refused with 415 and a JSON reason', async () => {
  const topo = await startServer(['topology', '--otlp-listen', '127.0.0.1:0', '--listen-for', '20s', '--format', 'json'], 10000);
  const r = await fetch(`${topo.base}/v1/traces`, {
    method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body: new Uint8Array([10, 0]),
  });
  assert.equal(r.status, 415);
  assert.match((await r.json()).message, /protobuf bodies are refused/);
  const bad = await fetch(`${topo.base}/v1/traces`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"resourceSpans": 3',
  });
  assert.equal(bad.status, 400);
  topo.proc.kill('SIGTERM');
  const exit = await topo.waitExit();
  assert.equal(exit.code, 143);
  assert.match(topo.stderr, /0 spans \(2 refused\)/);
});

test('chaos suggest on the merged topology puts the gateway timeout first', async () => {
  assert.ok(global.liveDoc, 'the live test ran first');
  const topo = path.join(tmp, 'merged.json');
  fs.writeFileSync(topo, JSON.stringify(global.liveDoc));
  const out = path.join(tmp, 'sug');
  const r = await runBin(['chaos', 'suggest', '--topology', topo, '--out', out, '--format', 'json']);
  assert.equal(r.code, 0, r.stderr);
  const list = JSON.parse(r.stdout);
  // "the gateway's 800 ms timeout is below the model's p99: a 1 s first-token delay will cascade"
  assert.equal(list[0].id, 'model-slow-first-token');
  assert.match(list[0].reason, /llm \(app\/llm\.py:6\) times out after 800 ms, below the traced p99 of \d+ ms/);
  const text = fs.readFileSync(path.join(out, list[0].file), 'utf8');
  assert.match(text, /fault: \{"type":"sse_ttft_delay","delay":"1000ms"\}/);
  const c = await runBin(['chaos', '--check', path.join(out, list[0].file)]);
  assert.equal(c.code, 0, c.stdout + c.stderr);
});
