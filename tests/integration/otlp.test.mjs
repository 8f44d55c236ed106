// OpenTelemetry traces: `tokenstorm run --otlp-endpoint` against the real
// simulator, with a loopback OTLP/HTTP receiver written here that checks every
// POST /v1/traces body against the OTLP JSON mapping (hex ids, int64 as
// strings, enums as integers, required fields; gunzipped when sent with
// Content-Encoding: gzip). The spans are counted against the run's requests,
// and their trace and span ids against the traceparent headers the simulator
// logged. Then the exporter's answers to a receiver that says 503 twice (the
// spans arrive after retries), and one that says 400 (no retry, counted failed).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { runBin, startSim, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-otlp-'));
const trace = path.join(tmp, 'trace.jsonl');
let sim;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise', '--trace-log', trace]);
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

// The environment without any OTEL_* variable of the machine running the tests.
function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('OTEL_')) env[k] = v;
  return { ...env, ...extra };
}

const run = (args, { env = cleanEnv(), timeoutMs } = {}) => runBin(['run', ...args], { env, timeoutMs });

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const DEC = /^[0-9]+$/;

// Returns a list of what breaks the OTLP JSON mapping in one span.
function mappingErrors(sp) {
  const e = [];
  if (!HEX32.test(sp.traceId) || /^0+$/.test(sp.traceId)) e.push(`traceId ${sp.traceId}`);
  if (!HEX16.test(sp.spanId) || /^0+$/.test(sp.spanId)) e.push(`spanId ${sp.spanId}`);
  if ('parentSpanId' in sp && !HEX16.test(sp.parentSpanId)) e.push('parentSpanId');
  if (typeof sp.name !== 'string' || !sp.name) e.push('name');
  if (!Number.isInteger(sp.kind)) e.push(`kind ${JSON.stringify(sp.kind)} is not an integer`);
  for (const k of ['startTimeUnixNano', 'endTimeUnixNano']) {
    if (typeof sp[k] !== 'string' || !DEC.test(sp[k])) e.push(`${k} is not a decimal string`);
  }
  if (!e.length && BigInt(sp.endTimeUnixNano) < BigInt(sp.startTimeUnixNano)) e.push('end < start');
  if (!sp.status || !Number.isInteger(sp.status.code)) e.push('status.code is not an integer');
  for (const a of sp.attributes || []) {
    const kinds = Object.keys(a.value || {});
    if (typeof a.key !== 'string' || kinds.length !== 1) e.push(`attribute ${a.key}`);
    if ('intValue' in a.value && !(typeof a.value.intValue === 'string' && DEC.test(a.value.intValue))) {
      e.push(`${a.key}: intValue ${JSON.stringify(a.value.intValue)} is not a decimal string`);
    }
    if ('doubleValue' in a.value && typeof a.value.doubleValue !== 'number') e.push(`${a.key}: doubleValue`);
  }
  for (const ev of sp.events || []) {
    if (typeof ev.timeUnixNano !== 'string' || !DEC.test(ev.timeUnixNano) || !ev.name) e.push('event');
  }
  for (const k of Object.keys(sp)) if (k.includes('_')) e.push(`snake_case key ${k}`);
  return e;
}

// A loopback OTLP/HTTP receiver. statuses[i] answers the i-th POST (the last
// one repeats). Resolves with { url, posts, spans, errors, headers, close() }.
function startReceiver({ statuses = [200], retryAfter = null } = {}) {
  const rx = { posts: 0, spans: [], errors: [], headers: [], resources: [] };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const i = rx.posts++;
      rx.headers.push(req.headers);
      let body = Buffer.concat(chunks);
      try {
        if (req.method !== 'POST' || req.url !== '/v1/traces') throw new Error(`${req.method} ${req.url}`);
        if (req.headers['content-type'] !== 'application/json') throw new Error(`content-type ${req.headers['content-type']}`);
        if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
        const doc = JSON.parse(body.toString('utf8'));
        for (const rs of doc.resourceSpans) {
          rx.resources.push(rs.resource);
          for (const ss of rs.scopeSpans) {
            if (ss.scope.name !== 'tokenstorm') rx.errors.push(`scope ${ss.scope.name}`);
            for (const sp of ss.spans) {
              rx.errors.push(...mappingErrors(sp));
              // a retried batch is the same spans again: count what was accepted
              if ((statuses[Math.min(i, statuses.length - 1)]) === 200) rx.spans.push(sp);
            }
          }
        }
      } catch (err) {
        rx.errors.push(String(err));
      }
      const status = statuses[Math.min(i, statuses.length - 1)];
      const headers = { 'content-type': 'application/json' };
      if (retryAfter !== null && status !== 200) headers['retry-after'] = String(retryAfter);
      res.writeHead(status, headers);
      res.end(status === 200 ? '{}' : '{"code":14,"message":"not now"}');
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

const attrs = (sp) => Object.fromEntries((sp.attributes || []).map((a) => [a.key, a.value]));
const readJsonl = (f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

test('one span per request, GenAI attributes, trace ids as sent in traceparent', async () => {
  const rx = await startReceiver();
  const out = path.join(tmp, 'basic');
  const r = await run(['--target', sim.base, '--otlp-endpoint', rx.url, '--requests', '20', '--rate', '50',
    '--input-len', 'fixed:32', '--output-len', 'fixed:8', '--seed', '3', '--workers', '2',
    '--body', '{"temperature":0.25}', '-q', '--out', out]);
  await rx.close();
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(rx.errors, []);
  assert.equal(rx.spans.length, 20);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  assert.deepEqual({ ...result.otlp, batches: undefined, retries: undefined },
    { exported: 20, dropped: 0, failed: 0, batches: undefined, retries: undefined });
  assert.match(r.stdout, /traces \(OTLP\): 20 spans exported, 0 dropped \(queue full\), 0 failed/);
  const svc = rx.resources[0].attributes.find((a) => a.key === 'service.name');
  assert.equal(svc.value.stringValue, 'tokenstorm');

  const model = result.run.model;
  const runId = result.run.run_id;
  const ids = new Set();
  for (const sp of rx.spans) {
    const a = attrs(sp);
    assert.equal(sp.name, `chat ${model}`);
    assert.equal(sp.kind, 3);
    assert.equal(sp.status.code, 0);
    assert.equal(a['gen_ai.operation.name'].stringValue, 'chat');
    assert.equal(a['gen_ai.provider.name'].stringValue, 'openai');
    assert.equal(a['gen_ai.request.model'].stringValue, model);
    assert.equal(a['gen_ai.request.stream'].boolValue, true);
    assert.equal(a['gen_ai.request.max_tokens'].intValue, '8');
    assert.equal(a['gen_ai.request.temperature'].doubleValue, 0.25);
    assert.match(a['gen_ai.response.id'].stringValue, /^chatcmpl-/);
    assert.equal(a['gen_ai.response.model'].stringValue, model);
    assert.deepEqual(a['gen_ai.response.finish_reasons'].arrayValue.values, [{ stringValue: 'length' }]);
    assert.equal(a['gen_ai.usage.output_tokens'].intValue, '8');
    assert.match(a['gen_ai.usage.input_tokens'].intValue, /^[1-9][0-9]*$/);
    assert.ok(a['gen_ai.response.time_to_first_chunk'].doubleValue > 0);
    assert.equal(a['server.address'].stringValue, '127.0.0.1');
    assert.equal(a['server.port'].intValue, String(sim.port));
    assert.equal(a['tokenstorm.outcome'].stringValue, 'ok');
    assert.ok(a['tokenstorm.ttft_ms'].doubleValue > 0);
    assert.ok(a['tokenstorm.itl.mean_ms'].doubleValue >= 0);
    assert.ok(a['tokenstorm.itl.max_ms'].doubleValue >= a['tokenstorm.itl.mean_ms'].doubleValue);
    assert.equal(a['error.type'], undefined);
    // no event per token: one first-chunk event, inside the span
    assert.equal(sp.events.length, 1);
    assert.equal(sp.events[0].name, 'gen_ai.first_chunk');
    const t = BigInt(sp.events[0].timeUnixNano);
    assert.ok(t >= BigInt(sp.startTimeUnixNano) && t <= BigInt(sp.endTimeUnixNano));
    assert.ok(a['tokenstorm.request_id'].stringValue.startsWith(`ts-${runId}-`));
    ids.add(a['tokenstorm.request_id'].stringValue);
  }
  assert.equal(ids.size, 20, 'one span per request');
  assert.equal(new Set(rx.spans.map((s) => s.traceId)).size, 20, 'a trace per request');

  // the ids the simulator received in traceparent are the spans' ids
  let truth = [];
  for (let i = 0; i < 30 && truth.length < 20; i++) {
    await sleep(100); // the trace log is flushed every 200 ms
    truth = readJsonl(trace).filter((l) => l.request_id.startsWith(`ts-${runId}-`));
  }
  assert.equal(truth.length, 20);
  const byReq = new Map(rx.spans.map((s) => [attrs(s)['tokenstorm.request_id'].stringValue, s]));
  for (const l of truth) {
    const sp = byReq.get(l.request_id);
    assert.ok(sp, `no span for ${l.request_id}`);
    assert.equal(l.traceparent, `00-${sp.traceId}-${sp.spanId}-01`);
  }
});

test('environment: endpoint, gzip, headers, service name; secrets stay out of the output', async () => {
  const rx = await startReceiver();
  const out = path.join(tmp, 'env');
  const env = cleanEnv({
    OTEL_EXPORTER_OTLP_ENDPOINT: rx.url + '/',
    OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip',
    OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20sekrit-token,x-tenant=t1',
    OTEL_SERVICE_NAME: 'load-test',
  });
  const r = await run(['--target', sim.base, '--requests', '5', '--rate', '50', '--input-len', 'fixed:16',
    '--output-len', 'fixed:4', '-v', '--out', out], { env });
  await rx.close();
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(rx.errors, []);
  assert.equal(rx.spans.length, 5);
  for (const h of rx.headers) {
    assert.equal(h['content-encoding'], 'gzip');
    assert.equal(h.authorization, 'Bearer sekrit-token');
    assert.equal(h['x-tenant'], 't1');
  }
  const svc = rx.resources[0].attributes.find((a) => a.key === 'service.name');
  assert.equal(svc.value.stringValue, 'load-test');
  const files = fs.readdirSync(out).map((f) => fs.readFileSync(path.join(out, f), 'utf8')).join('\n');
  for (const text of [r.stdout, r.stderr, files]) assert.ok(!text.includes('sekrit'), 'a header value leaked');
});

test('503 twice: the spans arrive after retries honouring Retry-After', async () => {
  const rx = await startReceiver({ statuses: [503, 503, 200], retryAfter: 0 });
  const out = path.join(tmp, 'retry');
  const r = await run(['--target', sim.base, '--otlp-endpoint', rx.url, '--requests', '5', '--rate', '50',
    '--input-len', 'fixed:16', '--output-len', 'fixed:4', '-q', '--out', out],
  { env: cleanEnv({ OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '5' }) });
  await rx.close();
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(rx.errors, []);
  assert.equal(rx.posts, 3);
  assert.equal(rx.spans.length, 5);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  assert.equal(result.otlp.exported, 5);
  assert.equal(result.otlp.failed, 0);
  assert.equal(result.otlp.retries, 2);
});

test('400: not retried, counted as failed, the run itself still passes', async () => {
  const rx = await startReceiver({ statuses: [400] });
  const out = path.join(tmp, 'bad');
  const r = await run(['--target', sim.base, '--otlp-endpoint', rx.url, '--requests', '5', '--rate', '50',
    '--input-len', 'fixed:16', '--output-len', 'fixed:4', '-q', '--out', out],
  { env: cleanEnv({ OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '5' }) });
  await rx.close();
  assert.equal(r.code, 0, r.stderr);
  assert.equal(rx.posts, 1);
  const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
  assert.deepEqual([result.otlp.exported, result.otlp.failed, result.otlp.retries], [0, 5, 0]);
  assert.match(r.stdout, /0 spans exported, 0 dropped \(queue full\), 5 failed/);
  assert.match(r.stderr, /answered 400/);
});

test('an invalid --otlp-endpoint is a usage error', async () => {
  const r = await run(['--target', sim.base, '--otlp-endpoint', 'ftp://x', '--requests', '1']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--otlp-endpoint/);
});
