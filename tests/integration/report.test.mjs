// `tokenstorm report` on the result of a real short run against the built-in
// simulator: every format, the error exits, and the HTML page rendered in
// headless Chromium (screenshot, charts present, no network request made).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, runBin } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-report-'));
const runA = path.join(tmp, 'results', 'run-a');
const runB = path.join(tmp, 'results', 'run-b');

// Runs bin (BIN, a browser) like runBin.
const exec = (bin, args, opts) => runBin(args, { ...opts, bin });
const ts = (args, opts) => exec(BIN, args, opts);

before(async () => {
  // Two short open-loop runs against the in-process simulator (no --target).
  const common = ['--output-len', 'uniform:16-48', '--input-len', 'fixed:128', '-q', '--workers', '2'];
  const a = await ts(['run', '--duration', '3s', '--rate', '10', '--out', runA, '--slo', 'ttft.p99<60s',
    '--slo', 'e2el.p50<1ms', ...common], { timeoutMs: 90000 });
  assert.equal(a.code, 1, `run A (one SLO fails on purpose): ${a.stderr}`);
  const b = await ts(['run', '--requests', '30', '--rate', '20', '--out', runB, ...common], { timeoutMs: 90000 });
  assert.equal(b.code, 0, `run B: ${b.stderr}`);
});
after(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('--help has examples; usage errors exit 2', async () => {
  const h = await ts(['report', '--help']);
  assert.equal(h.code, 0);
  assert.match(h.stdout, /examples:/);
  assert.match(h.stdout, /--format F/);
  const none = await ts(['report']);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /no input/);
  const fmt = await ts(['report', '--format', 'pdf', runA]);
  assert.equal(fmt.code, 2);
  assert.match(fmt.stderr, /--format: expected text, csv, json or html; got 'pdf'/);
});

test('unreadable or invalid inputs exit 2 naming the file and the problem', async () => {
  const missing = path.join(tmp, 'nope', 'result.json');
  let r = await ts(['report', missing]);
  assert.equal(r.code, 2);
  assert.ok(r.stderr.includes(missing), r.stderr);
  const bad = path.join(tmp, 'bad.json');
  fs.writeFileSync(bad, '{"schema": "tokenstorm.result/1",\n "summary": [1,}\n');
  r = await ts(['report', '--format', 'html', '-o', path.join(tmp, 'x.html'), bad]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /bad\.json: not valid JSON: line 2/);
  assert.ok(!fs.existsSync(path.join(tmp, 'x.html')), 'nothing is written on bad input');
  const other = path.join(tmp, 'other.json');
  fs.writeFileSync(other, '{"schema": "k6/1"}');
  r = await ts(['report', other]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /other\.json: not a tokenstorm result, sweep, mirror or topology \(schema "k6\/1"/);
  const empty = fs.mkdtempSync(path.join(tmp, 'empty-'));
  r = await ts(['report', empty]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /no result\.json, sweep\.json or topology\.json/);
});

test('text: the run summary and the stored SLO verdicts', async () => {
  const r = await ts(['report', runA]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^== run run-a \(/);
  assert.match(r.stdout, /latency \(ms\)\s+mean\s+p50/);
  assert.match(r.stdout, /ttft\.p99<60s\s+\S+ ms\s+pass/);
  assert.match(r.stdout, /e2el\.p50<1ms\s+\S+ ms\s+FAIL/);
});

test('json: a digest with percentiles from the histograms', async () => {
  const r = await ts(['report', '--format', 'json', runA, path.join(runB, 'result.json')]);
  assert.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout);
  assert.equal(j.schema, 'tokenstorm.report/1');
  assert.deepEqual(j.inputs.map((i) => i.name), ['run-a', 'run-b']);
  const b = j.inputs[1];
  assert.equal(b.kind, 'result');
  assert.equal(b.summary.completed, 30);
  const p = b.percentiles_ms.e2el;
  assert.ok(p.p50 > 0 && p.p50 <= p.p90 && p.p90 <= p.p99 && p.p99 <= p.p100, JSON.stringify(p));
  // The digest agrees with the run's own histogram figures (latency.*); the
  // summary's vLLM-named fields are numpy's over exact samples (vllm.fields).
  assert.ok(Math.abs(p.p99 - b.latency.e2el.p99) < 1e-6, `${p.p99} vs ${b.latency.e2el.p99}`);
  assert.equal(b.vllm.fields.e2el.method, 'exact');
  assert.equal(b.histograms, undefined);
});

test('csv: Locust columns (E2EL), the TTFT twin and the timeline', async () => {
  const prefix = path.join(tmp, 'csv', 'out');
  fs.mkdirSync(path.dirname(prefix));
  const r = await ts(['report', '--format', 'csv', '-o', prefix, path.join(tmp, 'results')]);
  assert.equal(r.code, 0, r.stderr);
  const header = 'Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,'
    + 'Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,'
    + '50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%';
  const result = JSON.parse(fs.readFileSync(path.join(runB, 'result.json'), 'utf8'));
  for (const [file, metric] of [['out_stats.csv', 'e2el'], ['out_ttft_stats.csv', 'ttft']]) {
    const lines = fs.readFileSync(path.join(tmp, 'csv', file), 'utf8').trim().split('\n');
    assert.equal(lines[0], header);
    assert.equal(lines.length, 3, 'one row per run');
    const row = lines[2].split(',');
    assert.deepEqual(row.slice(0, 4), ['POST', 'run-b', '30', '0']);
    // Median and 99% columns are the run's own p50 / p99 of that metric.
    assert.ok(Math.abs(Number(row[4]) - result.latency[metric].p50) < 0.0011, `${file} median`);
    assert.ok(Math.abs(Number(row[18]) - result.latency[metric].p99) < 0.0011, `${file} p99`);
  }
  const tl = fs.readFileSync(path.join(tmp, 'csv', 'out_timeline.csv'), 'utf8').trim().split('\n');
  assert.match(tl[0], /^Name,t_s,sent,completed,/);
  assert.ok(tl.length > 3);
  assert.ok(!fs.existsSync(path.join(tmp, 'csv', 'out_sweep.csv')), 'no sweep, no sweep table');
});

// ---- the HTML page -----------------------------------------------------------------

function findChromium() {
  for (const name of [process.env.CHROMIUM, 'chromium', 'chromium-browser', 'google-chrome']) {
    if (!name) continue;
    const r = spawnSync('sh', ['-c', `command -v "${name}"`], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return null;
}

// Renders file to a screenshot with a NetLog of every request the browser
// started; name resolution is disabled so nothing can leave the machine.
async function render(file, png, netlog) {
  const profile = fs.mkdtempSync(path.join(tmp, 'chromium-'));
  const r = await exec(findChromium(), [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run', `--user-data-dir=${profile}`,
    '--host-resolver-rules=MAP * ~NOTFOUND', '--enable-logging=stderr',
    `--log-net-log=${netlog}`, '--net-log-capture-mode=Everything',
    `--screenshot=${png}`, '--window-size=1366,3000', `file://${file}`,
  ], { timeoutMs: 90000 });
  assert.equal(r.code, 0, `chromium failed: ${r.stderr.slice(-2000)}`);
}

// URLs the page itself asked for: requests whose top frame is the file://
// page. (Chromium's own update/time/sign-in pings, refused by the resolver
// rule, belong to no page and are not counted.)
function pageRequests(netlog) {
  let text = fs.readFileSync(netlog, 'utf8');
  let log;
  try {
    log = JSON.parse(text);
  } catch {
    text = text.trim().replace(/,$/, '');
    log = JSON.parse(text.endsWith(']}') ? text : `${text}]}`); // a log cut short
  }
  const types = Object.fromEntries(Object.entries(log.constants.logEventTypes).map(([k, v]) => [v, k]));
  const urls = [];
  for (const e of log.events) {
    const p = e.params || {};
    if (types[e.type] !== 'URL_REQUEST_START_JOB' || !p.url) continue;
    const fromPage = `${p.network_isolation_key || ''} ${p.site_for_cookies || ''}`.includes('file://');
    if (fromPage && !p.url.startsWith('file:')) urls.push(p.url);
  }
  return urls;
}

function pngSize(file) {
  const b = fs.readFileSync(file);
  assert.equal(b.subarray(1, 4).toString(), 'PNG');
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20), bytes: b.length };
}

test('html: self-contained page with the charts, rendered by headless Chromium', async (t) => {
  const page = path.join(tmp, 'page.html');
  const r = await ts(['report', runA, runB, '--format', 'html', '--out', page, '--title', 'CI report']);
  assert.equal(r.code, 0, r.stderr);
  const html = fs.readFileSync(page, 'utf8');

  // The charts, by id: distributions (overlaid runs) and each run's timeline.
  const ids = [...html.matchAll(/<svg class="ts-chart[^"]*" id="([^"]+)"/g)].map((m) => m[1]);
  for (const m of ['ttft', 'itl', 'e2el']) {
    assert.ok(ids.includes(`dist-${m}-cdf`), `no ${m} CDF`);
    assert.ok(ids.includes(`dist-${m}-spectrum`), `no ${m} spectrum`);
  }
  for (const run of ['run1', 'run2']) {
    for (const c of ['rate', 'inflight', 'tokens', 'ttft']) assert.ok(ids.includes(`${run}-timeline-${c}`), `${run} ${c}`);
  }
  assert.ok(ids.length >= 14, `only ${ids.length} charts`);
  assert.equal((html.match(/<svg/g) || []).length, (html.match(/<\/svg>/g) || []).length);
  // Two runs overlaid: both names in the CDF legend.
  const cdf = html.slice(html.indexOf('id="dist-ttft-cdf"'), html.indexOf('</svg>', html.indexOf('id="dist-ttft-cdf"')));
  assert.match(cdf, />run-a<\/text>/);
  assert.match(cdf, />run-b<\/text>/);
  assert.match(html, /<title>CI report<\/title>/);
  assert.match(html, /e2el\.p50&lt;1ms/);

  // Nothing that could fetch: no script, no external stylesheet, image, font or frame.
  assert.doesNotMatch(html, /<script/i);
  assert.doesNotMatch(html, /<link\b/i);
  assert.doesNotMatch(html, /@import/i);
  assert.doesNotMatch(html, /<(img|iframe|object|embed|video|audio|source)\b/i);
  for (const m of html.matchAll(/\b(src|href|xlink:href|action|srcset)\s*=\s*"([^"]*)"/gi)) {
    assert.ok(m[2].startsWith('#'), `${m[1]}="${m[2]}" points outside the page`);
  }
  for (const m of html.matchAll(/url\(([^)]*)\)/g)) assert.ok(m[1].startsWith('#'), `url(${m[1]})`);

  if (!findChromium()) {
    t.skip('chromium is not installed (scripts/deps.sh installs it): the rendering check was skipped');
    return;
  }
  const png = path.join(tmp, 'page.png');
  const netlog = path.join(tmp, 'netlog.json');
  await render(page, png, netlog);
  const size = pngSize(png);
  assert.equal(size.width, 1366);
  assert.equal(size.height, 3000);
  assert.ok(size.bytes > 50000, `a near-empty screenshot (${size.bytes} bytes)`);
  assert.deepEqual(pageRequests(netlog), [], 'the page made network requests');

  // The check can fail: the same page with one remote image is caught.
  const bad = path.join(tmp, 'page-with-remote-image.html');
  fs.writeFileSync(bad, html.replace('</body>', '<img src="http://example.invalid/pixel.png"></body>'));
  const netlog2 = path.join(tmp, 'netlog2.json');
  await render(bad, path.join(tmp, 'page2.png'), netlog2);
  assert.deepEqual(pageRequests(netlog2), ['http://example.invalid/pixel.png']);
});

// ---- every kind of page, in Chromium (issue 20) ----------------------------------

// The DOM Chromium built from file (no script runs: the report has none).
async function dumpDom(file) {
  const profile = fs.mkdtempSync(path.join(tmp, 'chromium-dom-'));
  const r = await exec(findChromium(), [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run', `--user-data-dir=${profile}`,
    '--host-resolver-rules=MAP * ~NOTFOUND', '--dump-dom', `file://${file}`,
  ], { timeoutMs: 90000 });
  assert.equal(r.code, 0, `chromium failed: ${r.stderr.slice(-2000)}`);
  return r.stdout;
}

// The ids of the cards' titles and the charts in a DOM.
const cardsOf = (dom) => [...dom.matchAll(/<div class="k">([^<]+)<\/div>/g)].map((m) => m[1]);
const chartsOf = (dom) => [...dom.matchAll(/<svg class="ts-chart[^"]*" id="([^"]+)"/g)].map((m) => m[1]);

test('html in Chromium: a plain run, a scenario run, a sweep and a failed run, each card and chart', async (t) => {
  if (!findChromium()) {
    t.skip('chromium is not installed (scripts/deps.sh installs it)');
    return;
  }
  const scen = path.join(tmp, 'results', 'scenario');
  const sweep = path.join(tmp, 'results', 'sweep');
  const failed = path.join(tmp, 'results', 'failed');
  const scenario = new URL('../../examples/scenarios/rag.yaml', import.meta.url).pathname;
  const [s, w, f] = await Promise.all([
    ts(['run', scenario, '--duration', '3s', '--out', scen, '-q'], { timeoutMs: 90000 }),
    ts(['sweep', '--rates', '4,8', '--out', sweep, '-q', '--', '--sim-profile', 'tiny', '--duration', '2s',
      '--output-len', 'fixed:16'], { timeoutMs: 90000 }),
    // nothing listens on port 9 of 127.0.0.1: every request fails to connect
    ts(['run', '--target', 'http://127.0.0.1:9/v1', '--model', 'm', '--requests', '5', '--rate', '20',
      '--out', failed, '-q'], { timeoutMs: 90000 }),
  ]);
  assert.equal(s.code, 0, s.stderr);
  assert.equal(w.code, 0, w.stderr);
  assert.equal(f.code, 3, f.stderr);
  const pages = {};
  for (const [name, dir] of [['plain', runB], ['scenario', scen], ['sweep', sweep], ['failed', failed]]) {
    const page = path.join(tmp, `kind-${name}.html`);
    const r = await ts(['report', dir, '--format', 'html', '--out', page]);
    assert.equal(r.code, 0, `${name}: ${r.stderr}`);
    const png = path.join(tmp, `kind-${name}.png`);
    await render(page, png, path.join(tmp, `kind-${name}-netlog.json`));
    assert.ok(pngSize(png).bytes > 30000, `${name}: a near-empty screenshot`);
    assert.deepEqual(pageRequests(path.join(tmp, `kind-${name}-netlog.json`)), [], `${name}: network requests`);
    pages[name] = await dumpDom(page);
  }
  // a plain run: every headline card, the timeline and the lengths charts
  const plain = pages.plain;
  for (const k of ['configuration', 'requests', 'throughput', 'output tokens', 'error rate', 'TTFT p50', 'TPOT p50', 'ITL p50', 'E2EL p50'])
    assert.ok(cardsOf(plain).includes(k), `plain: no ${k} card in ${cardsOf(plain)}`);
  assert.ok(!cardsOf(plain).includes('SLOs passed'), 'no SLO given, no SLO card');
  for (const c of ['run1-timeline-rate', 'run1-timeline-inflight', 'run1-timeline-tokens', 'run1-timeline-ttft',
    'run1-lengths', 'run1-ttft-input', 'run1-e2el-output', 'dist-ttft-cdf', 'dist-itl-cdf', 'dist-e2el-cdf'])
    assert.ok(chartsOf(plain).includes(c), `plain: no ${c}`);
  assert.match(plain, /class="note itl"/);
  // a scenario run: its classes' and flow steps' tables
  assert.match(pages.scenario, /<div class="k">configuration<\/div><div class="v">scenario</);
  assert.ok(chartsOf(pages.scenario).includes('run1-timeline-rate'));
  assert.match(pages.scenario, /<table[^>]* id="run1-classes"/);
  // a sweep: its cards and charts, and no green verdict without SLOs
  for (const c of ['sweep1-latency-throughput', 'sweep1-latency-load', 'sweep1-throughput', 'sweep1-errors'])
    assert.ok(chartsOf(pages.sweep).includes(c), `sweep: no ${c}`);
  assert.ok(cardsOf(pages.sweep).includes('knee of the latency curve'));
  assert.doesNotMatch(pages.sweep, /<td class="pass">pass<\/td>/);
  // a failed run: the error rate card in red, the errors by message, no latency invented
  assert.match(pages.failed, /<div class="card bad"><div class="k">error rate<\/div><div class="v">100\.00%/);
  assert.match(pages.failed, /connect/i);
  assert.doesNotMatch(pages.failed, /id="run1-lengths"/); // no successful request to sample
});
