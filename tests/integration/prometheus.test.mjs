// `tokenstorm run --metrics-listen` scraped by a real Prometheus server (the
// Debian package `prometheus`): the counts Prometheus stored equal the run's
// own result.json. Skipped, with a message, when the prometheus binary is
// missing (scripts/deps.sh installs it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { BIN, startSim, sleep } from './lib.mjs';

const PROMETHEUS = process.env.PROMETHEUS_BIN || 'prometheus';
const probe = spawnSync(PROMETHEUS, ['--version'], { encoding: 'utf8', timeout: 10000 });
const missing = probe.error ? `the prometheus binary is missing (${PROMETHEUS}: ${probe.error.code}); ` +
  'scripts/deps.sh installs it' : null;

// A port nobody listens on right now (Prometheus cannot bind :0 and tell us).
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Polls fn() every `everyMs` until it returns something truthy; fails after timeoutMs.
async function waitFor(what, fn, { timeoutMs = 20000, everyMs = 200 } = {}) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
}

async function getJson(url) {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return res.json();
}

test('Prometheus stores what the run reports', { skip: missing || false, timeout: 120000 }, async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-prom-'));
  const procs = [];
  let sim;
  let killRun;
  try {
    sim = await startSim(['--profile', 'tiny', '--no-noise']);
    const out = path.join(tmp, 'run');

    // the run: 10 s of load (Prometheus' service discovery hands a new target to
    // the scraper after up to 5 s), then /metrics stays up for the last scrapes
    const run = spawn(BIN, ['run', '--target', sim.base, '--rate', '20', '--duration', '10s',
      '--input-len', 'fixed:32', '--output-len', 'fixed:8', '--seed', '3', '--workers', '2',
      '--metrics-listen', '127.0.0.1:0', '--metrics-linger', '4s', '--out', out, '-q'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
    procs.push(run);
    let stderr = '';
    run.stderr.on('data', (d) => { stderr += d; });
    run.stdout.resume();
    const runExit = new Promise((resolve) => run.on('exit', (code, sig) => resolve({ code, sig })));
    killRun = setTimeout(() => run.kill('SIGKILL'), 60000);
    const metricsPort = await waitFor('the metrics URL', () => {
      const m = stderr.match(/metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/);
      return m && Number(m[1]);
    }, { timeoutMs: 10000, everyMs: 50 });

    // Prometheus, scraping it every second
    const promPort = await freePort();
    const config = path.join(tmp, 'prometheus.yml');
    fs.writeFileSync(config, [
      'global:',
      '  scrape_interval: 1s',
      '  scrape_timeout: 1s',
      'scrape_configs:',
      '  - job_name: tokenstorm',
      '    static_configs:',
      `      - targets: ['127.0.0.1:${metricsPort}']`,
      '',
    ].join('\n'));
    const prom = spawn(PROMETHEUS, [`--config.file=${config}`, `--storage.tsdb.path=${path.join(tmp, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn'], { stdio: ['ignore', 'ignore', 'pipe'] });
    procs.push(prom);
    let promLog = '';
    prom.stderr.on('data', (d) => { promLog += d; });
    const api = `http://127.0.0.1:${promPort}`;
    await waitFor('Prometheus to be ready', async () => (await fetch(`${api}/-/ready`,
      { signal: AbortSignal.timeout(2000) })).ok, { timeoutMs: 30000 }).catch((e) => {
      throw new Error(`${e.message}\n${promLog}`);
    });

    // while the run goes on: the target is up and was parsed as OpenMetrics
    // (Prometheus asks for it first; `info` and `unit` exist only there)
    await waitFor('a successful scrape', async () => {
      const t = await getJson(`${api}/api/v1/targets`);
      return t.data.activeTargets.some((x) => x.health === 'up');
    });
    const meta = await waitFor('target metadata', async () => {
      const m = await getJson(`${api}/api/v1/targets/metadata?match_target=${encodeURIComponent('{job="tokenstorm"}')}`);
      return m.data.length ? m.data : null;
    });
    const byName = Object.fromEntries(meta.map((m) => [m.metric, m]));
    assert.equal(byName.tokenstorm_run?.type, 'info', JSON.stringify(byName.tokenstorm_run));
    assert.equal(byName.gen_ai_client_operation_duration_seconds?.type, 'histogram');
    assert.equal(byName.gen_ai_client_operation_duration_seconds?.unit, 'seconds');
    assert.equal(byName.tokenstorm_requests?.type, 'counter');

    const r = await runExit; // bounded by killRun
    assert.equal(r.code, 0, stderr);
    const result = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));

    // The target is gone now: read the last value scraped of each series.
    const query = async (q) => {
      const j = await getJson(`${api}/api/v1/query?query=${encodeURIComponent(q)}`);
      assert.equal(j.status, 'success', q);
      return j.data.result;
    };
    const one = async (q) => {
      const res = await query(q);
      assert.equal(res.length, 1, `${q}: ${JSON.stringify(res)}`);
      return Number(res[0].value[1]);
    };
    const last = (sel) => `last_over_time(${sel}[5m])`;

    // it scraped during the run, not only at the end
    const scrapes = await one('count_over_time(up{job="tokenstorm"}[5m])');
    assert.ok(scrapes >= 3, `only ${scrapes} scrapes`);
    const firstSent = await one('min_over_time(tokenstorm_requests_sent_total[5m])');

    const total = Object.values(result.outcomes).reduce((a, b) => a + b, 0);
    assert.ok(result.outcomes.ok >= 120, `a run of 10 s at 20/s: ${JSON.stringify(result.outcomes)}`);
    assert.ok(firstSent < total, `the first scrape saw ${firstSent} of ${total} requests`);

    const byOutcome = await query(`sum by (outcome) (${last('tokenstorm_requests_total')})`);
    assert.equal(byOutcome.length, Object.keys(result.outcomes).length);
    for (const s of byOutcome)
      assert.equal(Number(s.value[1]), result.outcomes[s.metric.outcome], `outcome ${s.metric.outcome}`);
    assert.equal(await one(last('tokenstorm_requests_sent_total')), total);
    assert.equal(await one(last('tokenstorm_requests_in_flight')), 0);
    assert.equal(await one(last('tokenstorm_output_tokens_total')), result.tokens.output_all);

    // histogram counts against the run's own latency counts
    assert.equal(await one(`sum(${last('gen_ai_client_operation_duration_seconds_count')})`), total);
    assert.equal(await one(last('gen_ai_client_operation_duration_seconds_count{error_type=""}')),
      result.latency.e2el_uncorrected.count);
    assert.equal(await one(last('gen_ai_client_operation_duration_seconds_bucket{error_type="",le="+Inf"}')),
      result.latency.e2el_uncorrected.count);
    assert.equal(await one(last('gen_ai_client_operation_time_to_first_chunk_seconds_count')),
      result.latency.ttft_uncorrected.count);
    assert.equal(await one(last('gen_ai_client_operation_time_per_output_chunk_seconds_count')),
      result.latency.itl.count);
    assert.equal(await one(last('tokenstorm_ttft_seconds_count')), result.latency.ttft.count);
    assert.equal(await one(last('tokenstorm_schedule_lag_seconds_count')), result.latency.lag.count);
    assert.equal(await one(last('gen_ai_client_token_usage_count{gen_ai_token_type="input"}')), result.outcomes.ok);
    assert.equal(await one(last('gen_ai_client_token_usage_sum{gen_ai_token_type="input"}')), result.tokens.input);
    assert.equal(await one(last('gen_ai_client_token_usage_sum{gen_ai_token_type="output"}')), result.tokens.output);
    // fixed lengths: every request asked for 32 input and 8 output tokens
    assert.equal(await one(last('gen_ai_client_token_usage_bucket{gen_ai_token_type="output",le="4.0"}')), 0);
    assert.equal(await one(last('gen_ai_client_token_usage_bucket{gen_ai_token_type="output",le="16.0"}')),
      result.outcomes.ok);

    // the labels: the run's identity, never a request id
    const info = await query(last('tokenstorm_run_info'));
    assert.equal(info.length, 1);
    assert.equal(info[0].metric.run_id, result.run.run_id);
    assert.equal(info[0].metric.model, 'tokenstorm/tiny');
    assert.equal(info[0].metric.endpoint, 'chat');
    const dur = await query(last('gen_ai_client_operation_duration_seconds_count'));
    assert.equal(dur[0].metric.gen_ai_operation_name, 'chat');
    assert.equal(dur[0].metric.gen_ai_provider_name, 'openai');
    assert.equal(dur[0].metric.server_address, '127.0.0.1');
    assert.equal(dur[0].metric.server_port, String(sim.port));

    // the Grafana dashboard's queries run on this Prometheus; TTFT p99 has a value
    const dash = JSON.parse(fs.readFileSync(new URL('../../examples/grafana/tokenstorm.json', import.meta.url), 'utf8'));
    const exprs = dash.panels.flatMap((p) => p.targets.map((t) => t.expr));
    assert.ok(exprs.length >= 6);
    for (const e of exprs) await query(e.replaceAll('$__rate_interval', '1m').replaceAll('$instance', '.*'));
    const ttft = await query(dash.panels[0].targets[1].expr.replaceAll('$__rate_interval', '1m')
      .replaceAll('$instance', '.*'));
    assert.equal(ttft.length, 1);
    const p99 = Number(ttft[0].value[1]);
    assert.ok(p99 > 0 && p99 < 30, `TTFT p99 ${p99} s`);
  } finally {
    clearTimeout(killRun);
    for (const p of procs) {
      if (p.exitCode === null && p.signalCode === null) {
        const gone = new Promise((resolve) => p.on('exit', resolve));
        p.kill('SIGTERM');
        const t = setTimeout(() => p.kill('SIGKILL'), 5000);
        await gone;
        clearTimeout(t);
      }
    }
    if (sim) await sim.stop('SIGKILL');
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
