// The live dashboard (`run --ui`, issue 20): the report's own sections for
// the run so far, served by the run's HTTP server and kept current over
// server-sent events; a stop button that ends the run as Ctrl-C does; the
// control-surface rule (a token, as a header or ?token=). Rendered in
// headless Chromium at two moments (the screenshots differ) with no request
// leaving the machine. Every target is the simulator inside the run, on
// 127.0.0.1; every run and every wait is bounded.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin, sleep, startSim } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-ui-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// Starts `run --ui 127.0.0.1:0 ARGS`; resolves with { base, done } once the
// dashboard's address is printed (done: the run's end, as runBin gives it).
function startRun(args, name) {
  return new Promise((resolve, reject) => {
    let started = false;
    const done = runBin(['run', '--ui', '127.0.0.1:0', '--sim-profile', 'tiny', '--out', path.join(tmp, name), ...args], {
      timeoutMs: 90000,
      onStderr: (err) => {
        const m = err.match(/dashboard on (http:\/\/127\.0\.0\.1:\d+)\//);
        if (m && !started) {
          started = true;
          resolve({ base: m[1], done });
        }
      },
    });
    done.then((r) => { if (!started) reject(new Error(`the run ended before its dashboard: ${r.stderr}`)); });
  });
}

// Starts `tokenstorm ARGS` (sweep or chaos with --ui); resolves with
// { base, done } once it prints its page's address.
function startCmd(args) {
  return new Promise((resolve, reject) => {
    let started = false;
    const done = runBin(args, {
      timeoutMs: 150000,
      onStderr: (err) => {
        const m = err.match(/tokenstorm (?:sweep|chaos): dashboard on (http:\/\/127\.0\.0\.1:\d+)\//);
        if (m && !started) {
          started = true;
          resolve({ base: m[1], done });
        }
      },
    });
    done.then((r) => { if (!started) reject(new Error(`ended before its dashboard (${r.code}): ${r.stderr}`)); });
  });
}

// Reads /events until pred(frame, inner) holds for a frame (bounded in
// time); resolves with { frame, inner } (inner: the last "inner" port, or '').
async function waitFrame(url, pred, ms = 60000) {
  const res = await fetch(url, { signal: AbortSignal.timeout(ms) });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  let inner = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the event stream ended first');
      text += dec.decode(value, { stream: true });
      let i;
      while ((i = text.indexOf('\n\n')) >= 0) {
        const ev = text.slice(0, i);
        text = text.slice(i + 2);
        const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (ev.startsWith('event: inner')) inner = data.trim();
        if (ev.startsWith('event: frame') && pred(data, inner)) return { frame: data, inner };
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

// Reads n "frame" events of /events (a bounded wait), as the page's EventSource would.
async function frames(url, n) {
  const res = await fetch(url, { signal: AbortSignal.timeout(20000) });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  const out = [];
  while (out.length < n) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
    let i;
    while ((i = text.indexOf('\n\n')) >= 0) {
      const ev = text.slice(0, i);
      text = text.slice(i + 2);
      const data = ev.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
      if (ev.startsWith('event: frame')) out.push(data);
    }
  }
  await reader.cancel();
  return out;
}

function findChromium() {
  for (const name of [process.env.CHROMIUM, 'chromium', 'chromium-browser']) {
    if (!name) continue;
    const r = spawnSync('sh', ['-c', `command -v "${name}"`], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return null;
}

// Chromium on url: a screenshot, or the DOM after the page's script ran
// until the event stream ended; names other than 127.0.0.1 do not resolve,
// and the NetLog lists every request started.
function chromium(url, { png, dom, netlog }) {
  const profile = fs.mkdtempSync(path.join(tmp, 'chromium-'));
  const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run', `--user-data-dir=${profile}`,
    '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1', '--window-size=1366,2400'];
  if (netlog) args.push(`--log-net-log=${netlog}`, '--net-log-capture-mode=Everything');
  if (png) args.push(`--screenshot=${png}`);
  if (dom) args.push('--virtual-time-budget=60000', '--dump-dom');
  // asynchronous: the test's own requests go on while Chromium waits
  return new Promise((resolve) => {
    execFile(findChromium(), [...args, url], { timeout: 90000, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      assert.equal(err, null, `chromium failed: ${(stderr || '').slice(-1500)}`);
      resolve(stdout);
    });
  });
}

function requestedHosts(netlog) {
  let text = fs.readFileSync(netlog, 'utf8').trim();
  let log;
  try { log = JSON.parse(text); } catch { text = text.replace(/,$/, ''); log = JSON.parse(text.endsWith(']}') ? text : `${text}]}`); }
  const types = Object.fromEntries(Object.entries(log.constants.logEventTypes).map(([k, v]) => [v, k]));
  const hosts = new Set();
  for (const e of log.events) {
    const p = e.params || {};
    if (types[e.type] !== 'URL_REQUEST_START_JOB' || !p.url || !/^https?:/.test(p.url)) continue;
    // the page's own requests (Chromium's update and sign-in pings, refused
    // by the resolver rule, belong to no page)
    const fromPage = `${p.network_isolation_key || ''} ${p.site_for_cookies || ''}`.includes('127.0.0.1');
    if (fromPage) hosts.add(new URL(p.url).host);
  }
  return [...hosts];
}

test('the dashboard: the report\'s charts, updated every second, and a stop button', async (t) => {
  const run = await startRun(['--rate', '8', '--duration', '40s', '--output-len', 'fixed:32'], 'live');
  await sleep(2500);
  // the page: the report's sections (cards, the timeline charts) and its one script
  const page = await (await fetch(`${run.base}/`, { signal: AbortSignal.timeout(10000) })).text();
  for (const id of ['overview', 'run1', 'run1-timeline-rate', 'run1-timeline-inflight', 'run1-timeline-tokens', 'run1-timeline-ttft', 'dist-ttft-cdf'])
    assert.match(page, new RegExp(`id="${id}"`), `no ${id}`);
  assert.match(page, /<div class="k">configuration<\/div><div class="v">open <span class="u">8\.00 req\/s<\/span><\/div><div class="s">chat, 40 s, seed/);
  assert.match(page, /<button id="stop"/);
  assert.equal((page.match(/<script/g) || []).length, 1);
  // /events: a frame a second, each drawn anew (the run goes on between them)
  const [a, b, c] = await frames(`${run.base}/events`, 3);
  assert.match(c, /id="run1-timeline-rate"/);
  assert.notEqual(a, c, 'the frames did not change');
  assert.ok(b.length > 1000);
  // Prometheus is still at /metrics on the same address
  const m = await fetch(`${run.base}/metrics`, { signal: AbortSignal.timeout(10000) });
  assert.equal(m.status, 200);
  assert.match(await m.text(), /tokenstorm_requests_total|gen_ai_client_operation_duration/);
  assert.equal((await fetch(`${run.base}/nope`, { signal: AbortSignal.timeout(10000) })).status, 404);
  assert.equal((await fetch(`${run.base}/stop`, { signal: AbortSignal.timeout(10000) })).status, 405);

  if (findChromium()) {
    // two moments, two different pictures; the page's script keeps the frame
    // current until the run ends, then says so; nothing beyond 127.0.0.1
    const png1 = path.join(tmp, 'live1.png');
    const png2 = path.join(tmp, 'live2.png');
    const netlog = path.join(tmp, 'live-netlog.json');
    await chromium(`${run.base}/`, { png: png1, netlog });
    await sleep(3000);
    await chromium(`${run.base}/`, { png: png2 });
    const [p1, p2] = [fs.readFileSync(png1), fs.readFileSync(png2)];
    assert.equal(p1.subarray(1, 4).toString(), 'PNG');
    assert.ok(p1.length > 30000, `a near-empty screenshot (${p1.length} bytes)`);
    assert.ok(!p1.equals(p2), 'the two screenshots are the same');
    const hosts = requestedHosts(netlog);
    assert.ok(hosts.length > 0, 'the NetLog saw none of the page\'s requests');
    assert.deepEqual(hosts.filter((h) => !h.startsWith('127.0.0.1:')), []);
    // the DOM once the script has run: once the page's EventSource is
    // connected (/status counts it), stop the run (the button's request)
    const stopper = (async () => {
      for (let i = 0; i < 300; i++) {
        const st = await (await fetch(`${run.base}/status`, { signal: AbortSignal.timeout(10000) })).json();
        if (st.viewers > 0) break;
        await sleep(100);
      }
      return fetch(`${run.base}/stop`, { method: 'POST', signal: AbortSignal.timeout(10000) });
    })();
    const dom = await chromium(`${run.base}/`, { dom: true });
    assert.equal((await stopper).status, 202);
    assert.match(dom, /id="status">the run is over: final results</);
    for (const id of ['run1-timeline-rate', 'run1-timeline-ttft', 'dist-e2el-cdf']) assert.match(dom, new RegExp(`id="${id}"`));
  } else {
    t.diagnostic('chromium is not installed (scripts/deps.sh installs it): the rendering check was skipped');
    const r = await fetch(`${run.base}/stop`, { method: 'POST', signal: AbortSignal.timeout(10000) });
    assert.equal(r.status, 202);
  }
  // the stop ends the run as Ctrl-C does: results written, exit 130
  const r = await run.done;
  assert.equal(r.code, 130, r.stderr);
  const res = JSON.parse(fs.readFileSync(path.join(tmp, 'live', 'result.json'), 'utf8'));
  assert.equal(res.run.interrupted_by, 'stop');
  assert.ok(res.summary.completed > 0);
});

test('with a token the dashboard wants it, as a header or ?token=', async () => {
  const run = await startRun(['--rate', '4', '--duration', '20s', '--api-token', 's3cret-Token'], 'token');
  const get = (p, h = {}) => fetch(`${run.base}${p}`, { headers: h, signal: AbortSignal.timeout(10000) });
  assert.equal((await get('/')).status, 401);
  assert.equal((await get('/?token=wrong')).status, 401);
  const ok = await get('/?token=s3cret-Token');
  assert.equal(ok.status, 200);
  assert.doesNotMatch(await ok.text(), /s3cret/); // the page never echoes it
  assert.equal((await get('/', { authorization: 'Bearer s3cret-Token' })).status, 200);
  const stop = await fetch(`${run.base}/stop`, { method: 'POST', signal: AbortSignal.timeout(10000) });
  assert.equal(stop.status, 401);
  const stop2 = await fetch(`${run.base}/stop?token=s3cret-Token`, { method: 'POST', signal: AbortSignal.timeout(10000) });
  assert.equal(stop2.status, 202);
  const r = await run.done;
  assert.equal(r.code, 130, r.stderr);
  assert.doesNotMatch(fs.readFileSync(path.join(tmp, 'token', 'result.json'), 'utf8'), /s3cret/);
});

test('--ui on a routable address without a token is refused (exit 2)', async () => {
  const r = await runBin(['run', '--ui', '0.0.0.0:0', '--duration', '1s', '--out', path.join(tmp, 'open')]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--ui/);
});

test('sweep --ui: the steps so far, the running step\'s own dashboard, a stop button', async (t) => {
  const out = path.join(tmp, 'sweep');
  const sw = await startCmd(['sweep', '--rates', '2,3,4', '--ui', '127.0.0.1:0', '--out', out, '--',
    '--sim-profile', 'tiny', '--duration', '8s', '--output-len', 'fixed:32']);
  // step 1 runs: the page says so and names the step's dashboard, a run --ui of its own
  const first = await waitFrame(`${sw.base}/events`, (f, inner) => /Running: rate 2 req\/s \(step 1\)/.test(f) && inner);
  const inner = `http://127.0.0.1:${first.inner}`;
  let st;
  for (let i = 0; i < 100; i++) { // the child's dashboard may take a moment to listen
    st = await fetch(`${inner}/status`, { signal: AbortSignal.timeout(5000) }).catch(() => null);
    if (st) break;
    await sleep(100);
  }
  assert.equal(st.status, 200);
  const page = await (await fetch(`${sw.base}/`, { signal: AbortSignal.timeout(10000) })).text();
  assert.match(page, /<title>tokenstorm sweep<\/title>/);
  assert.match(page, /<section id="inner" hidden>/);
  assert.equal((page.match(/<script/g) || []).length, 1);
  const png1 = path.join(tmp, 'sweep1.png');
  const netlog = path.join(tmp, 'sweep-netlog.json');
  const chrome = findChromium();
  if (chrome) await chromium(`${sw.base}/`, { png: png1, netlog });
  // step 2 runs: step 1 is drawn as the report draws a sweep, and the
  // partial sweep.json on disk holds it
  const second = await waitFrame(`${sw.base}/events`, (f) => /\(step 2\)/.test(f));
  for (const id of ['sweep1', 'sweep1-latency-load', 'sweep1-throughput', 'sweep1-ttft-cdf'])
    assert.match(second.frame, new RegExp(`id="${id}"`), `no ${id}`);
  assert.notEqual(second.inner, first.inner, 'each step has its own dashboard');
  const partial = JSON.parse(fs.readFileSync(path.join(out, 'sweep.json'), 'utf8'));
  assert.equal(partial.steps.length, 1);
  if (chrome) {
    const png2 = path.join(tmp, 'sweep2.png');
    await chromium(`${sw.base}/`, { png: png2 });
    const [p1, p2] = [fs.readFileSync(png1), fs.readFileSync(png2)];
    assert.equal(p1.subarray(1, 4).toString(), 'PNG');
    assert.ok(!p1.equals(p2), 'the two screenshots are the same');
    const hosts = requestedHosts(netlog);
    assert.ok(hosts.includes(`127.0.0.1:${first.inner}`), `the step's dashboard was not loaded: ${hosts}`);
    assert.deepEqual(hosts.filter((h) => !h.startsWith('127.0.0.1:')), []);
    const stopper = (async () => {
      for (let i = 0; i < 300; i++) {
        const s = await (await fetch(`${sw.base}/status`, { signal: AbortSignal.timeout(10000) })).json();
        if (s.viewers > 0) break;
        await sleep(100);
      }
      return fetch(`${sw.base}/stop`, { method: 'POST', signal: AbortSignal.timeout(10000) });
    })();
    const dom = await chromium(`${sw.base}/`, { dom: true });
    assert.equal((await stopper).status, 202);
    assert.match(dom, /id="status">the run is over: final results</);
    assert.match(dom, /id="sweep1-latency-load"/);
  } else {
    t.diagnostic('chromium is not installed (scripts/deps.sh installs it): the rendering check was skipped');
    const r = await fetch(`${sw.base}/stop`, { method: 'POST', signal: AbortSignal.timeout(10000) });
    assert.equal(r.status, 202);
  }
  // the stop is Ctrl-C: the running step stops and writes, sweep.json says interrupted, exit 130
  const r = await sw.done;
  assert.equal(r.code, 130, r.stderr);
  const doc = JSON.parse(fs.readFileSync(path.join(out, 'sweep.json'), 'utf8'));
  assert.equal(doc.interrupted, true);
  assert.ok(doc.steps.length >= 1);
});

test('sweep --ui: the token rule, and no --ui of its own in the run options', async () => {
  let r = await runBin(['sweep', '--rates', '1', '--ui', '0.0.0.0:0', '--out', path.join(tmp, 'sw-open'), '--', '--duration', '1s']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /tokenstorm sweep: --ui: /);
  r = await runBin(['sweep', '--rates', '1', '--ui', '127.0.0.1:0', '--out', path.join(tmp, 'sw-twice'), '--', '--ui', '127.0.0.1:0']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--ui cannot be passed to the runs/);
  const sw = await startCmd(['sweep', '--rates', '2', '--ui', '127.0.0.1:0', '--api-token', 's3cret-Token',
    '--out', path.join(tmp, 'sw-token'), '--', '--sim-profile', 'tiny', '--duration', '20s']);
  assert.equal((await fetch(`${sw.base}/`, { signal: AbortSignal.timeout(10000) })).status, 401);
  assert.equal((await fetch(`${sw.base}/stop`, { method: 'POST', signal: AbortSignal.timeout(10000) })).status, 401);
  const { inner } = await waitFrame(`${sw.base}/events?token=s3cret-Token`, (f, i) => i);
  // the step's dashboard wants the same token (given in its environment, not its argv)
  let st;
  for (let i = 0; i < 100; i++) {
    st = await fetch(`http://127.0.0.1:${inner}/status`, { signal: AbortSignal.timeout(5000) }).catch(() => null);
    if (st) break;
    await sleep(100);
  }
  assert.equal(st.status, 401);
  assert.equal((await fetch(`http://127.0.0.1:${inner}/status?token=s3cret-Token`, { signal: AbortSignal.timeout(5000) })).status, 200);
  assert.equal((await fetch(`${sw.base}/stop?token=s3cret-Token`, { method: 'POST', signal: AbortSignal.timeout(10000) })).status, 202);
  const r2 = await sw.done;
  assert.equal(r2.code, 130, r2.stderr);
});

// chaos --ui: an experiment against a simulator with its admin API (127.0.0.1)
function experimentFile(name, sim, seconds) {
  const file = path.join(tmp, `${name}.yaml`);
  fs.writeFileSync(file, JSON.stringify({
    title: `live ${name}`, 'steady-state-hypothesis': { probes: [{ slo: 'error_rate<5%' }] },
    method: [{ name: 'errors', at: '2s', for: '3s', sim: sim.base, fault: { type: 'error_rate', rate: 0.5 } }],
    load: ['--target', `${sim.base}/v1`, '--rate', '10', '--duration', `${seconds}s`, '--input-len', 'fixed:32',
      '--output-len', 'fixed:8', '--seed', '2'],
  }));
  return file;
}

async function innerUp(port, query = '') {
  for (let i = 0; i < 100; i++) {
    const st = await fetch(`http://127.0.0.1:${port}/status${query}`, { signal: AbortSignal.timeout(5000) }).catch(() => null);
    if (st) return st;
    await sleep(100);
  }
  return null;
}

test('chaos --ui: the phases as they happen, the load\'s own dashboard, the verdict', async (t) => {
  const sim = await startSim(['--profile', 'tiny', '--no-noise', '--admin', '--seed', '5']);
  try {
    const file = experimentFile('verdict', sim, 9);
    const out = path.join(tmp, 'chaos');
    const ch = await startCmd(['chaos', file, '--out', out, '--ui', '127.0.0.1:0']);
    const first = await waitFrame(`${ch.base}/events`, (f, inner) => /id="chaos-phases"/.test(f) && /pending/.test(f) && inner);
    assert.match(first.frame, /Experiment: live verdict/);
    assert.equal((await innerUp(first.inner)).status, 200);
    const on = await waitFrame(`${ch.base}/events`, (f) => /<b>on<\/b> since/.test(f));
    assert.match(on.frame, /error_rate \(sim\)/);
    const page = await (await fetch(`${ch.base}/`, { signal: AbortSignal.timeout(10000) })).text();
    assert.match(page, /<title>tokenstorm chaos<\/title>/);
    const chrome = findChromium();
    let dom = null;
    if (chrome) {
      const png1 = path.join(tmp, 'chaos1.png');
      const netlog = path.join(tmp, 'chaos-netlog.json');
      await chromium(`${ch.base}/`, { png: png1, netlog });
      assert.ok(fs.readFileSync(png1).length > 20000);
      const hosts = requestedHosts(netlog);
      assert.ok(hosts.includes(`127.0.0.1:${first.inner}`), `the load's dashboard was not loaded: ${hosts}`);
      assert.deepEqual(hosts.filter((h) => !h.startsWith('127.0.0.1:')), []);
      // the DOM once the experiment is judged (the page's script runs until the end event)
      dom = await chromium(`${ch.base}/`, { dom: true });
    } else {
      t.diagnostic('chromium is not installed: the rendering check was skipped');
    }
    const r = await ch.done;
    assert.ok([0, 1].includes(r.code), r.stderr);
    const e = JSON.parse(fs.readFileSync(path.join(out, 'experiment.json'), 'utf8'));
    if (dom) {
      assert.match(dom, /id="status">the run is over: final results</);
      assert.match(dom, new RegExp(`id="chaos-verdict">${e.verdict}`));
      assert.match(dom, /id="chaos-windows"/);
      assert.match(dom, /during 'errors'/);
      assert.match(dom, /done: on at \+2\.\d s, off at \+5\.\d s/);
    }
  } finally {
    await sim.stop('SIGKILL');
  }
});

test('chaos --ui: the stop button stops the experiment as Ctrl-C does (rollbacks, exit 130)', async () => {
  const sim = await startSim(['--profile', 'tiny', '--no-noise', '--admin', '--seed', '5']);
  try {
    const file = experimentFile('stop', sim, 30);
    const out = path.join(tmp, 'chaos-stop');
    // with a token: the page and the load's dashboard want it; the simulator
    // the faults go to (no token of its own) still gets them
    const ch = await startCmd(['chaos', file, '--out', out, '--ui', '127.0.0.1:0', '--api-token', 's3cret-Token']);
    assert.equal((await fetch(`${ch.base}/`, { signal: AbortSignal.timeout(10000) })).status, 401);
    const { inner } = await waitFrame(`${ch.base}/events?token=s3cret-Token`, (f, i) => /<b>on<\/b> since/.test(f) && i);
    assert.equal((await innerUp(inner)).status, 401);
    assert.equal((await innerUp(inner, '?token=s3cret-Token')).status, 200);
    assert.equal((await fetch(`${sim.base}/admin/faults`, { signal: AbortSignal.timeout(5000) }).then((x) => x.json())).faults.length, 1);
    assert.equal((await fetch(`${ch.base}/stop`, { method: 'POST', signal: AbortSignal.timeout(10000) })).status, 401);
    assert.equal((await fetch(`${ch.base}/stop?token=s3cret-Token`, { method: 'POST', signal: AbortSignal.timeout(10000) })).status, 202);
    const r = await ch.done;
    assert.equal(r.code, 130, r.stderr);
    assert.deepEqual(await fetch(`${sim.base}/admin/faults`, { signal: AbortSignal.timeout(5000) }).then((x) => x.json()), { faults: [] });
    const e = JSON.parse(fs.readFileSync(path.join(out, 'experiment.json'), 'utf8'));
    assert.equal(e.interrupted, true);
    assert.doesNotMatch(fs.readFileSync(path.join(out, 'experiment.json'), 'utf8'), /s3cret/);
    assert.ok(r.ms < 25000, `the stop took ${r.ms} ms`);
  } finally {
    await sim.stop('SIGKILL');
  }
});
