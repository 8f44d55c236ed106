// The server's view during a run (--server-metrics) and runs spread over
// several processes: --shard i/N (+ tokenstorm merge) and, in an MPI build,
// mpirun -n 2. Everything on loopback, every process with a timeout.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, runBin, startSim } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-dist-'));
let sim;     // light load: latencies are the engine's, not the queue's
let slowSim; // 4 sequences at a time, 10 ms steps: a queue builds up

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise']);
  slowSim = await startSim(['--profile', 'tiny', '--no-noise', '--set', 'max_num_seqs=4',
    '--set', 't_fix_ms=10']);
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  if (slowSim) await slowSim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

// Runs a command (BIN, mpirun) like runBin.
const exec = (cmd, args, opts) => runBin(args, { ...opts, bin: cmd });
const run = (args, opts) => exec(BIN, ['run', ...args], opts);
const readJson = (f) => JSON.parse(fs.readFileSync(f, 'utf8'));
const readJsonl = (f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));

test('--server-metrics puts the server queue and KV usage on the timeline', async () => {
  const out = path.join(tmp, 'server');
  const r = await run(['--target', slowSim.base, '--rate', '20', '--duration', '3s', '--drain', '1s',
    '--input-len', 'fixed:64', '--output-len', 'fixed:64', '--server-metrics', `${slowSim.base}/metrics`,
    '--server-metrics-interval', '500ms', '--out', out, '-q', '--seed', '3']);
  assert.equal(r.code, 0, r.stderr);
  const res = readJson(path.join(out, 'result.json'));
  const tl = res.server_timeline;
  assert.ok(Array.isArray(tl) && tl.length >= 6, `points: ${JSON.stringify(tl)}`);
  assert.equal(res.server_metrics.flavor, 'vllm');
  assert.equal(res.server_metrics.failures, 0);
  assert.equal(res.server_metrics.interval_s, 0.5);
  assert.equal(res.server_metrics.scrapes, tl.length);
  for (let i = 1; i < tl.length; i++) assert.ok(tl[i].t_s > tl[i - 1].t_s);
  assert.ok(tl[0].t_s >= 0 && tl[0].t_s < 0.3, `first scrape at time 0: ${tl[0].t_s}`);
  // the engine is full (4 running) and the rest of the load waits
  assert.equal(Math.max(...tl.map((p) => p.running)), 4);
  assert.ok(Math.max(...tl.map((p) => p.waiting)) >= 10, JSON.stringify(tl.map((p) => p.waiting)));
  assert.ok(tl.some((p) => p.kv_usage > 0));
  assert.ok(tl.every((p) => p.preemptions_total === 0));
  // the server's own TTFT, from its histogram between scrapes
  const ttft = tl.filter((p) => p.ttft_p50_ms !== null);
  assert.ok(ttft.length >= 2);
  assert.ok(ttft.every((p) => p.ttft_count > 0 && p.ttft_p50_ms > 0 && p.ttft_p99_ms >= p.ttft_p50_ms));
  // the server counted as many first tokens as the client saw, give or take the edges
  const serverFirst = tl.reduce((a, p) => a + (p.ttft_count || 0), 0);
  assert.ok(serverFirst <= res.summary.requests + 4, `${serverFirst} vs ${res.summary.requests}`);
});

test('a server without metrics is counted, not fatal', async () => {
  const out = path.join(tmp, 'nometrics');
  const r = await run(['--target', sim.base, '--rate', '10', '--duration', '2s',
    '--server-metrics', `${sim.base}/no-such-metrics`, '--out', out, '--seed', '3']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /server metrics: .*HTTP status 404/);
  const res = readJson(path.join(out, 'result.json'));
  assert.deepEqual(res.server_timeline, []);
  assert.ok(res.server_metrics.scrapes >= 2);
  assert.equal(res.server_metrics.failures, res.server_metrics.scrapes);
  assert.ok(res.summary.completed > 0);
});

test('--server-metrics auto scrapes the built-in simulator', async () => {
  const out = path.join(tmp, 'auto');
  const r = await run(['--sim-profile', 'tiny', '--rate', '20', '--duration', '2s', '--output-len', 'fixed:16',
    '--server-metrics', 'auto', '--server-metrics-interval', '250ms', '--out', out, '-q']);
  assert.equal(r.code, 0, r.stderr);
  const res = readJson(path.join(out, 'result.json'));
  assert.match(res.server_metrics.url, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
  assert.equal(res.server_metrics.flavor, 'vllm');
  assert.equal(res.server_metrics.failures, 0);
  assert.ok(res.server_timeline.length >= 6, `${res.server_timeline.length} points`);
  assert.ok(res.server_timeline.some((p) => p.running > 0));
});

const SHARD_ARGS = ['--rate', '40', '--requests', '60', '--input-len', 'uniform:20-80', '--output-len',
  'fixed:8', '--seed', '11', '--save-requests', '-q'];

test('--shard 0/2 and 1/2 send exactly what one process sends', async () => {
  const single = path.join(tmp, 'single');
  const s0 = path.join(tmp, 'shard0');
  const s1 = path.join(tmp, 'shard1');
  const r = await run(['--target', sim.base, ...SHARD_ARGS, '--out', single, '--workers', '3']);
  assert.equal(r.code, 0, r.stderr);
  // the shards run at the same time, as an Indexed Job's pods do, with other worker
  // counts, started together by --start-at
  const startAt = (Date.now() + 1500) / 1000;
  const shard = (k, out, workers) => run(['--target', sim.base, ...SHARD_ARGS, '--out', out, '--shard',
    `${k}/2`, '--workers', workers, '--start-at', startAt.toFixed(3)]);
  const [a, b] = await Promise.all([shard(0, s0, '1'), shard(1, s1, '2')]);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(b.code, 0, b.stderr);
  const started = [s0, s1].map((d) => Date.parse(readJson(path.join(d, 'result.json')).run.started_at));
  // not before the time (1.5 s after the launch); after it by less than a
  // second, a margin that holds on a loaded machine under ASan (133 ms seen)
  for (const t of started) assert.ok(t >= startAt * 1000 - 2 && t < startAt * 1000 + 1000, `${t} vs ${startAt}`);
  const ids = (d) => readJsonl(path.join(d, 'requests.jsonl')).map((q) => q.id);
  const want = ids(single).sort((x, y) => x - y);
  assert.deepEqual(want, [...Array(60).keys()]);
  const i0 = ids(s0);
  const i1 = ids(s1);
  assert.ok(i0.every((i) => i % 2 === 0) && i1.every((i) => i % 2 === 1));
  assert.deepEqual([...i0, ...i1].sort((x, y) => x - y), want, 'union = the single run, disjoint');
  // same bodies: the prompts' token counts per id are the single run's
  const tokens = (d) => new Map(readJsonl(path.join(d, 'requests.jsonl')).map((q) => [q.id, q.prompt_tokens]));
  const t = tokens(single);
  for (const [id, n] of [...tokens(s0), ...tokens(s1)]) assert.equal(n, t.get(id), `request ${id}`);
  assert.equal(readJson(path.join(s1, 'result.json')).run.shard, '1/2');

  const help = spawnSync(BIN, ['merge', '--help'], { timeout: 10000 });
  if (help.status !== 0) return; // no merge command in this build: the ids are the check
  const merged = path.join(tmp, 'merged');
  const m = await exec(BIN, ['merge', '-q', merged, s0, s1]);
  assert.equal(m.code, 0, m.stderr);
  const one = readJson(path.join(single, 'result.json')).summary;
  const all = readJson(path.join(merged, 'result.json')).summary;
  assert.equal(all.requests, one.requests);
  assert.equal(all.completed, one.completed);
  assert.equal(all.total_output_tokens, one.total_output_tokens);
  assert.equal(all.total_input_tokens, one.total_input_tokens);
});

test('closed loop: shards split the users and number their requests apart', async () => {
  const args = ['--target', sim.base, '--concurrency', '5', '--requests', '30', '--output-len', 'fixed:4',
    '--input-len', 'fixed:16', '--save-requests', '-q'];
  const dirs = [0, 1, 2].map((i) => path.join(tmp, `closed${i}`));
  const rs = await Promise.all(dirs.map((d, i) => run([...args, '--shard', `${i}/3`, '--out', d])));
  rs.forEach((r) => assert.equal(r.code, 0, r.stderr));
  const ids = dirs.map((d) => readJsonl(path.join(d, 'requests.jsonl')).map((q) => q.id));
  ids.forEach((list, i) => assert.ok(list.every((id) => id % 3 === i), `shard ${i}: ${list}`));
  assert.deepEqual(ids.flat().sort((x, y) => x - y), [...Array(30).keys()]);
});

const mpirun = spawnSync('sh', ['-c', 'command -v mpirun'], { encoding: 'utf8' }).stdout.trim();
const mpiBuild = process.env.TOKENSTORM_MPI_BUILD === '1';
const mpiSkip = !mpiBuild ? 'built without MPI (meson setup -Dmpi=enabled; make test-mpi)'
  : !mpirun ? 'no mpirun (scripts/deps.sh mpi)' : false;

test('mpirun -n 2: one merged result equal to a single process at the same rate', { skip: mpiSkip }, async () => {
  const args = ['--target', sim.base, '--rate', '20', '--requests', '60', '--input-len', 'fixed:64',
    '--output-len', 'fixed:16', '--seed', '5', '--save-requests', '-q', '--workers', '2'];
  const single = path.join(tmp, 'mpi-single');
  const r = await run([...args, '--out', single]);
  assert.equal(r.code, 0, r.stderr);
  const out = path.join(tmp, 'mpi');
  // Open MPI's own allocations are not ours to leak-check
  const env = { ...process.env, ASAN_OPTIONS: 'detect_leaks=0', OMPI_MCA_rmaps_base_oversubscribe: '1' };
  const m = await exec(mpirun, ['-n', '2', '--oversubscribe', '--allow-run-as-root', BIN, 'run', ...args,
    '--out', out], { env, timeoutMs: 120000 });
  assert.equal(m.code, 0, `${m.stdout}\n${m.stderr}`);
  const one = readJson(path.join(single, 'result.json'));
  const all = readJson(path.join(out, 'result.json'));
  assert.equal(all.run.mpi_ranks, 2);
  // counts: exactly the single process's
  for (const k of ['requests', 'completed', 'failed', 'total_input_tokens', 'total_output_tokens']) {
    assert.equal(all.summary[k], one.summary[k], k);
  }
  assert.equal(all.summary.requests, 60);
  assert.equal(all.latency.ttft.count, one.latency.ttft.count);
  assert.equal(all.latency.itl.count, one.latency.itl.count);
  // percentiles: within tolerance (two client processes, one server, light load)
  const near = (a, b, rel, abs) => Math.abs(a - b) <= Math.max(rel * b, abs);
  for (const [k, rel, abs] of [['ttft', 0.5, 15], ['e2el', 0.2, 30], ['tpot', 0.3, 3]]) {
    assert.ok(near(all.latency[k].p50, one.latency[k].p50, rel, abs),
      `${k} p50 ${all.latency[k].p50} vs ${one.latency[k].p50}`);
    assert.ok(near(all.latency[k].p90, one.latency[k].p90, rel * 2, abs * 2),
      `${k} p90 ${all.latency[k].p90} vs ${one.latency[k].p90}`);
  }
  // the timeline adds up to the requests; each rank kept its own requests.jsonl
  assert.equal(all.timeline.reduce((a, p) => a + p.sent, 0), 60);
  const ids = [0, 1].flatMap((k) => readJsonl(path.join(out, `rank-${k}`, 'requests.jsonl'))
    .map((q) => { assert.equal(q.id % 2, k); return q.id; }));
  assert.deepEqual(ids.sort((x, y) => x - y), [...Array(60).keys()]);
});

test('mpirun -n 2 with a scenario: per-class results merged across the ranks', { skip: mpiSkip }, async () => {
  const scn = path.join(tmp, 'two-classes.yaml');
  fs.writeFileSync(scn, ['name: two', 'seed: 3', 'duration: 2s', 'classes:',
    '  - name: open', '    rate: 10', '    arrival: constant', '    input_tokens: fixed:32', '    output_tokens: fixed:8',
    '  - name: closed', '    users: 2', '    think: fixed:0.1', '    input_tokens: fixed:32', '    output_tokens: fixed:8',
    ''].join('\n'));
  const out = path.join(tmp, 'mpi-classes');
  const env = { ...process.env, ASAN_OPTIONS: 'detect_leaks=0', OMPI_MCA_rmaps_base_oversubscribe: '1' };
  const m = await exec(mpirun, ['-n', '2', '--oversubscribe', '--allow-run-as-root', BIN, 'run', scn,
    '--target', sim.base, '-q', '--workers', '1', '--out', out], { env, timeoutMs: 120000 });
  assert.equal(m.code, 0, `${m.stdout}\n${m.stderr}`);
  const all = readJson(path.join(out, 'result.json'));
  assert.equal(all.run.mpi_ranks, 2);
  const [open, closed] = all.classes;
  // the open class: 10/s for 2 s over both ranks (each rank takes every other arrival)
  assert.equal(open.summary.requests, 20, JSON.stringify(open.summary));
  assert.equal(open.sent.requests, 20);
  // the closed class: 2 users, one per rank; both ranks' requests are in it
  assert.ok(closed.summary.requests >= 4, JSON.stringify(closed.summary));
  assert.equal(closed.sent.requests, closed.summary.requests);
  assert.equal(open.summary.requests + closed.summary.requests, all.summary.requests);
  assert.equal(open.latency.ttft.count + closed.latency.ttft.count, all.latency.ttft.count);
});
