// A small RAG + agent gateway traced with the real OpenTelemetry npm SDK
// (@opentelemetry/sdk-trace-node, exporter-trace-otlp-http, both pinned in
// package.json): the traced twin of tests/fixtures/topology/ragapp. It calls
// the simulator's embeddings, vector search and chat endpoints and a weather
// service that is not there (its span fails), with the GenAI, HTTP and
// OpenLLMetry attributes real instrumentations put on such spans.
//
// usage: node otel_app.mjs SIM_BASE OTLP_URL WEATHER_URL ITERATIONS [gzip|none]
import { trace, SpanKind, SpanStatusCode, context } from '@opentelemetry/api';
import { NodeTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';

const [simBase, otlpUrl, weatherUrl, iterArg, compression = 'none'] = process.argv.slice(2);
const iterations = Math.min(Number(iterArg) || 1, 50);
const exporter = new OTLPTraceExporter({ url: otlpUrl, compression, timeoutMillis: 10000 });
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'rag-gateway' }),
  spanProcessors: [new BatchSpanProcessor(exporter, { maxExportBatchSize: 64, scheduledDelayMillis: 200 })],
});
provider.register();
const tracer = trace.getTracer('ragapp', '1.0.0');
const sim = new URL(simBase);

// A span around fn(span); ERROR status when fn throws (then rethrown unless quiet).
async function inSpan(name, kind, attributes, fn, quiet = false) {
  return tracer.startActiveSpan(name, { kind, attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (e) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(e.message || e) });
      if (!quiet) throw e;
      return null;
    } finally {
      span.end();
    }
  });
}

async function post(path, body) {
  const r = await fetch(new URL(path, sim), {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
    signal: AbortSignal.timeout(20000),
  });
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

const genai = (op, model) => ({
  'gen_ai.operation.name': op, 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': model,
  'server.address': sim.hostname, 'server.port': Number(sim.port),
});

const chat = (q) => inSpan('chat tiny-chat', SpanKind.CLIENT, genai('chat', 'tiny-chat'), () =>
  post('/v1/chat/completions', {
    model: 'tiny-chat', max_tokens: 100, ignore_eos: true, messages: [{ role: 'user', content: q }],
  }));

async function ask(q) {
  return inSpan('POST /ask', SpanKind.SERVER, { 'http.request.method': 'POST', 'http.route': '/ask' }, async () => {
    await inSpan('VectorStoreRetriever.retrieve', SpanKind.INTERNAL,
      { 'traceloop.span.kind': 'task' }, async () => {
        await inSpan('embeddings tiny-embed', SpanKind.CLIENT, genai('embeddings', 'tiny-embed'),
          () => post('/v1/embeddings', { model: 'tiny-embed', input: q }));
        const url = new URL('/v1/vector_stores/vs_default/search', sim).href;
        await inSpan('POST', SpanKind.CLIENT, { 'http.request.method': 'POST', 'url.full': url },
          () => post('/v1/vector_stores/vs_default/search', { query: q, max_num_results: 3 }));
      });
    return chat(q);
  });
}

async function agent(q) {
  return inSpan('POST /agent', SpanKind.SERVER, { 'http.request.method': 'POST', 'http.route': '/agent' }, async () => {
    await chat(`plan: ${q}`);
    await inSpan('weather.tool', SpanKind.INTERNAL,
      { 'traceloop.span.kind': 'tool', 'traceloop.entity.name': 'weather' }, () =>
        inSpan('GET', SpanKind.CLIENT, { 'http.request.method': 'GET', 'url.full': weatherUrl },
          () => fetch(weatherUrl, { signal: AbortSignal.timeout(5000) }), true));
  });
}

const work = [];
for (let i = 0; i < iterations; i++) {
  work.push(context.with(context.active(), () => ask(`How do volcanoes erupt? (${i})`)));
  work.push(context.with(context.active(), () => agent(`weather in Lyon (${i})`)));
}
const results = await Promise.allSettled(work);
const failed = results.filter((r) => r.status === 'rejected');
await provider.forceFlush();
await provider.shutdown();
if (failed.length) {
  console.error(`${failed.length} requests failed: ${failed[0].reason}`);
  process.exit(1);
}
console.log(`sent ${iterations * 9} spans`);
