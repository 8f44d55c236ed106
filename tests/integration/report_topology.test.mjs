// `tokenstorm report` with a topology among its inputs: `tokenstorm
// topology` on the fixture app (tests/fixtures/topology/ragapp), a short run
// against the built-in simulator, then one page with both: the run's
// sections and a Topology section holding the same picture as
// topology.svg, its risk flags as a table, and nothing fetched from
// anywhere. A tampered topology.json is refused naming the file and field.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin } from './lib.mjs';

const fixtures = new URL('../fixtures/topology/', import.meta.url).pathname;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-report-topo-'));
const results = path.join(tmp, 'results');
const run = path.join(results, 'run-a');
const topo = path.join(results, 'topo');
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

function env() {
  const e = { ...process.env };
  for (const k of ['LLM_BASE_URL', 'WEATHER_URL', 'TOKENSTORM_PYTHON']) delete e[k];
  return e;
}

before(async () => {
  const t = await runBin(['topology', '--source', path.join(fixtures, 'ragapp'), '--out', topo], { env: env() });
  assert.equal(t.code, 0, t.stderr);
  const r = await runBin(['run', '--requests', '12', '--rate', '20', '--out', run, '-q',
    '--output-len', 'fixed:16', '--input-len', 'fixed:32'], { timeoutMs: 90000 });
  assert.equal(r.code, 0, r.stderr);
});

// The element <tag ...> whose opening contains `open`, up to its closing tag.
function element(page, open, tag) {
  const at = page.indexOf(open);
  assert.ok(at >= 0, `${open} is in the page`);
  const end = page.indexOf(`</${tag}>`, at);
  assert.ok(end > at);
  return page.slice(at, end + tag.length + 3);
}

test('one page: the run and the topology with its picture and its risks', async () => {
  const out = path.join(tmp, 'page.html');
  const r = await runBin(['report', '--format', 'html', '-o', out, run, topo]);
  assert.equal(r.code, 0, r.stderr);
  const page = fs.readFileSync(out, 'utf8');
  const doc = JSON.parse(fs.readFileSync(path.join(topo, 'topology.json'), 'utf8'));
  assert.ok(doc.flags.length >= 3, 'the fixture has risks');

  // The run's sections are still there, and the navigation reaches the topology.
  for (const id of ['overview', 'distributions', 'run1', 'topo1']) assert.match(page, new RegExp(`id="${id}"`));
  assert.match(page, /1 run, 1 topology: run-a, topo/);
  assert.match(page, /<a href="#topo1">Topology topo<\/a>/);
  assert.match(page, /<h2>Topology: topo<\/h2>/);

  // The picture is topology.svg's, with the page's id on it.
  const svg = element(page, '<svg id="topo1-graph" class="ts-topology"', 'svg');
  const own = fs.readFileSync(path.join(topo, 'topology.svg'), 'utf8').trimEnd();
  assert.equal(svg.replace(' id="topo1-graph"', '').replaceAll('topo1-graph-arr', 'ts-arr'), own);
  assert.equal((svg.match(/<g class="node /g) || []).length, doc.nodes.length);
  for (const [layer, colour] of [['gateway', '#4e79a7'], ['model', '#e15759'], ['vector', '#59a14f']]) {
    assert.ok(doc.nodes.some((n) => n.layer === layer));
    assert.match(svg, new RegExp(`<g class="node ${layer}"><rect [^>]*fill="${colour}"`));
  }

  // The risks, one row each, in the order of topology.json.
  const table = element(page, '<table id="topo1-flags">', 'table');
  const rows = [...table.matchAll(/<tr class="(high|medium|low)">.*?<\/tr>/gs)];
  assert.equal(rows.length, doc.flags.length);
  doc.flags.forEach((f, i) => {
    assert.equal(rows[i][1], f.severity);
    assert.ok(rows[i][0].includes(`<td class="l">${f.kind}</td>`), rows[i][0]);
  });

  // Self-contained: no script, nothing loaded, links inside the page only.
  assert.ok(!/<script|<link|<img|<iframe|@import| src=/i.test(page));
  for (const m of page.matchAll(/href="([^"]*)"/g)) assert.ok(m[1].startsWith('#'), m[1]);
  for (const m of page.matchAll(/url\(([^)]*)\)/g)) assert.ok(m[1].startsWith('#'), m[1]);
});

test('a directory of results holding the run and the topology; text and json too', async () => {
  const h = await runBin(['report', '--format', 'html', results]);
  assert.equal(h.code, 0, h.stderr);
  assert.match(h.stdout, /id="run1"/);
  assert.match(h.stdout, /<svg id="topo1-graph"/);
  const t = await runBin(['report', path.join(topo, 'topology.json')]);
  assert.equal(t.code, 0, t.stderr);
  assert.match(t.stdout, /^== topology topo \(/);
  assert.match(t.stdout, /risk \[high\] /);
  const j = await runBin(['report', '--format', 'json', run, topo]);
  assert.equal(j.code, 0, j.stderr);
  const inputs = JSON.parse(j.stdout).inputs;
  assert.deepEqual(inputs.map((i) => i.kind), ['result', 'topology']);
  const doc = JSON.parse(fs.readFileSync(path.join(topo, 'topology.json'), 'utf8'));
  assert.deepEqual(inputs[1].flags, doc.flags);
});

test('a tampered topology.json: exit 2 naming the file and the field, nothing written', async () => {
  const bad = path.join(tmp, 'bad');
  fs.mkdirSync(bad);
  const doc = JSON.parse(fs.readFileSync(path.join(topo, 'topology.json'), 'utf8'));
  doc.nodes[3].layer = '<img src=x>';
  fs.writeFileSync(path.join(bad, 'topology.json'), JSON.stringify(doc));
  const out = path.join(tmp, 'bad.html');
  const r = await runBin(['report', '--format', 'html', '-o', out, run, bad]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /bad\/topology\.json: nodes\[3\]\.layer: expected gateway, model, vector or infrastructure/);
  assert.ok(!fs.existsSync(out));
  doc.nodes[3].layer = 'model';
  doc.edges[0].to = 'nowhere';
  fs.writeFileSync(path.join(bad, 'topology.json'), JSON.stringify(doc));
  const r2 = await runBin(['report', bad]);
  assert.equal(r2.code, 2);
  assert.match(r2.stderr, /edges\[0\]\.to: names no node of nodes/);
});
