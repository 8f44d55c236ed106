// OpenTelemetry spans of the chaos proxy: `tokenstorm run --otlp-endpoint`
// through `tokenstorm proxy --otlp-endpoint` to the simulator, both exporting
// to one loopback OTLP/HTTP receiver. Each proxied request that carries a
// traceparent and gets a fault yields one SERVER span, child of the run's
// CLIENT span in the same trace, with a "tokenstorm.fault" event per fault;
// the simulator receives a traceparent naming the proxy span as parent.
// Requests without a fault give a span only with --otlp-all; requests without
// a traceparent never do.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, startServer, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-pxotel-'));
const trace = path.join(tmp, 'trace.jsonl');
let sim;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--trace-log', trace]);
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

function cleanEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OTEL_')) env[k] = v;
  return env;
}

async function startProxy(extra = []) {
  const p = await startServer(['proxy', '--upstream', sim.base, '--listen', '127.0.0.1:0',
    '--no-api', '--seed', '7', ...extra]);
  for (let i = 0; i < 100 && !/fault\(s\) loaded/.test(p.output); i++) await sleep(20);
  return p;
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const DEC = /^[0-9]+$/;

// A loopback OTLP/HTTP JSON receiver collecting every span.
function startReceiver() {
  const rx = { spans: [], errors: [] };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      try {
        if (req.method !== 'POST' || req.url !== '/v1/traces') throw new Error(`${req.method} ${req.url}`);
        const doc = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        for (const rs of doc.resourceSpans) for (const ss of rs.scopeSpans) for (const sp of ss.spans) {
          if (!HEX32.test(sp.traceId) || !HEX16.test(sp.spanId)) rx.errors.push(`ids ${sp.traceId} ${sp.spanId}`);
          if (!DEC.test(sp.startTimeUnixNano) || !DEC.test(sp.endTimeUnixNano)) rx.errors.push('times');
          for (const ev of sp.events || []) {
            if (!DEC.test(ev.timeUnixNano)) rx.errors.push('event time');
            for (const a of ev.attributes || []) {
              if ('intValue' in a.value && !DEC.test(a.value.intValue)) rx.errors.push(`event ${a.key}`);
            }
          }
          rx.spans.push(sp);
        }
      } catch (err) {
        rx.errors.push(String(err));
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      rx.url = `http://127.0.0.1:${server.address().port}`;
      rx.close = () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); });
      resolve(rx);
    });
  });
}

const attrs = (list) => Object.fromEntries((list || []).map((a) => [a.key, a.value]));
const readJsonl = (f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

test('run -> proxy (fault at p=1) -> sim: proxy spans are children of the client spans', async () => {
  const rx = await startReceiver();
  const faults = path.join(tmp, 'faults.yaml');
  fs.writeFileSync(faults, 'faults:\n  - {name: slow-in, type: http_delay_request, delay: 5ms}\n');
  // two loop threads: each has its own tracer; both export through the one exporter
  const px = await startProxy(['--faults', faults, '--otlp-endpoint', rx.url, '--threads', '2']);
  const out = path.join(tmp, 'run');
  try { // a failure must not leave the receiver open: node would wait for it forever
    const r = await runBin(['run', '--target', px.base, '--otlp-endpoint', rx.url, '--requests', '10',
      '--rate', '50', '--input-len', 'fixed:16', '--output-len', 'fixed:4', '--seed', '3', '-q', '--out', out],
    { env: cleanEnv() });
    assert.equal(r.code, 0, r.stderr);
    assert.equal((await px.stop('SIGTERM')).code, 0, px.stderr); // flushes the proxy's exporter
  } finally {
    await px.stop('SIGKILL');
    await rx.close();
  }
  assert.deepEqual(rx.errors, []);
  assert.match(px.output, /traces \(OTLP\): 10 spans exported, 0 dropped \(queue full\), 0 failed/);

  const client = rx.spans.filter((s) => s.kind === 3);
  const proxy = rx.spans.filter((s) => s.kind === 2);
  assert.equal(client.length, 10);
  assert.equal(proxy.length, 10);
  const byTrace = new Map(client.map((s) => [s.traceId, s]));
  assert.equal(byTrace.size, 10);
  const proxySpanIds = new Set();
  for (const sp of proxy) {
    const parent = byTrace.get(sp.traceId);
    assert.ok(parent, `proxy span in an unknown trace ${sp.traceId}`);
    assert.equal(sp.parentSpanId, parent.spanId);
    assert.notEqual(sp.spanId, parent.spanId);
    assert.ok(BigInt(sp.startTimeUnixNano) >= BigInt(parent.startTimeUnixNano));
    assert.ok(BigInt(sp.endTimeUnixNano) >= BigInt(sp.startTimeUnixNano) + 5000000n, 'the 5 ms delay is inside');
    assert.equal(sp.name, 'tokenstorm.proxy POST /v1/chat/completions');
    assert.equal(sp.status.code, 0);
    const a = attrs(sp.attributes);
    assert.equal(a['http.request.method'].stringValue, 'POST');
    assert.equal(a['url.path'].stringValue, '/v1/chat/completions');
    assert.equal(a['http.response.status_code'].intValue, '200');
    assert.equal(a['server.address'].stringValue, '127.0.0.1');
    assert.equal(a['server.port'].intValue, String(sim.port));
    assert.equal(a['tokenstorm.faults.count'].intValue, '1');
    assert.equal(sp.events.length, 1);
    const ev = sp.events[0];
    assert.equal(ev.name, 'tokenstorm.fault');
    const ea = attrs(ev.attributes);
    assert.equal(ea['tokenstorm.fault.name'].stringValue, 'slow-in');
    assert.equal(ea['tokenstorm.fault.type'].stringValue, 'http_delay_request');
    assert.match(ea['tokenstorm.fault.delay'].stringValue, /5/);
    const t = BigInt(ev.timeUnixNano);
    assert.ok(t >= BigInt(sp.startTimeUnixNano) && t <= BigInt(sp.endTimeUnixNano));
    proxySpanIds.add(`${sp.traceId}-${sp.spanId}`);
  }

  // the simulator got the proxy span as parent in traceparent
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  let truth = [];
  for (let i = 0; i < 30 && truth.length < 10; i++) {
    await sleep(100); // the trace log is flushed every 200 ms
    truth = readJsonl(trace).filter((l) => l.request_id.startsWith(`ts-${result.run.run_id}-`));
  }
  assert.equal(truth.length, 10);
  for (const l of truth) {
    const m = l.traceparent.match(/^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/);
    assert.ok(m, l.traceparent);
    assert.ok(proxySpanIds.has(`${m[1]}-${m[2]}`), `upstream parent ${l.traceparent} is not a proxy span`);
  }
});

const TP = (i) => `00-${'ab'.repeat(15)}${String(i).padStart(2, '0')}-${'cd'.repeat(7)}${String(i).padStart(2, '0')}-01`;
let model;
const post = (base, headers) => fetch(base + '/v1/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
  signal: AbortSignal.timeout(10000),
}).then(async (res) => { await res.arrayBuffer(); return res.status; });

test('default: only requests with a fault and a traceparent get a span; --otlp-all: all traced ones', async () => {
  model = (await (await fetch(sim.base + '/v1/models')).json()).data[0].id;
  for (const all of [false, true]) {
    const rx = await startReceiver();
    const px = await startProxy(['--otlp-endpoint', rx.url, ...(all ? ['--otlp-all'] : [])]);
    try {
      assert.equal(await post(px.base, { traceparent: TP(1) }), 200); // traced, no fault
      assert.equal(await post(px.base, { traceparent: TP(2), 'x-tokenstorm-fault-abort': '503' }), 503);
      assert.equal(await post(px.base, { 'x-tokenstorm-fault-abort': '503' }), 503); // no traceparent
      assert.equal(await post(px.base, { traceparent: 'garbage', 'x-tokenstorm-fault-abort': '503' }), 503);
      assert.equal((await px.stop('SIGTERM')).code, 0, px.stderr);
    } finally {
      await px.stop('SIGKILL');
      await rx.close();
    }
    assert.deepEqual(rx.errors, []);
    assert.equal(rx.spans.length, all ? 2 : 1, JSON.stringify(rx.spans));
    const ab = rx.spans.find((s) => s.traceId.endsWith('02'));
    assert.equal(ab.parentSpanId, `${'cd'.repeat(7)}02`);
    assert.equal(ab.kind, 2);
    assert.equal(ab.status.code, 2); // 5xx of a SERVER span is an error
    const a = attrs(ab.attributes);
    assert.equal(a['http.response.status_code'].intValue, '503');
    assert.equal(a['error.type'].stringValue, '503');
    assert.equal(a['tokenstorm.faults.count'].intValue, '1');
    const ea = attrs(ab.events[0].attributes);
    assert.equal(ab.events[0].name, 'tokenstorm.fault');
    assert.equal(ea['tokenstorm.fault.name'].stringValue, 'x-tokenstorm-fault-abort');
    assert.equal(ea['tokenstorm.fault.type'].stringValue, 'http_abort');
    assert.equal(ea['tokenstorm.fault.status'].intValue, '503');
    if (all) {
      const ok = rx.spans.find((s) => s.traceId.endsWith('01'));
      assert.equal(ok.parentSpanId, `${'cd'.repeat(7)}01`);
      assert.equal(ok.status.code, 0);
      assert.deepEqual(ok.events, []);
      assert.equal(attrs(ok.attributes)['tokenstorm.faults.count'].intValue, '0');
      assert.equal(attrs(ok.attributes)['http.response.status_code'].intValue, '200');
    }
  }
});
