// `tokenstorm sweep` against the built-in simulator (each step's run starts
// its own, exact "tiny" profile), with settings whose knee follows from the
// engine model (docs/SIMULATOR.md):
//
//   prompt 16 tokens, max_tokens 10, t_w 20 ms, t_fix 0.05 ms, b 0.01 ms/token
//   step time  = t_fix + max(t_w, b * N) + k_kv * ctx = 20.05 ms (+ < 0.0001 ms)
//   a request holds a running slot for 10 steps: 1 prefill step (which yields
//   the first token) + 9 decode steps = T = 200.5 ms
//   so with max_num_seqs = S = 4 the throughput saturates at
//   lambda* = S / T = 19.95 requests/s (rate mode); in the closed loop,
//   latency is flat up to S users and rises after: the knee is at N* = S.
//
// Steps of 20 ms keep the simulator's own per-step overhead (it starts the
// next step when the previous one has been written out, a fraction of a ms,
// more under ASan) to a few percent of the model.
//
// Bands (stated, and why). The simulator runs its model in real time, so it
// can only be slower than the model (its own work between steps, CPU shared
// with other tests), never faster: measured capacities must be within
// [0.75, 1.05] x the model's. A rate list on a 5 req/s grid lands on grid
// points: the knee must be within one grid spacing of the measured
// saturated throughput, and within [0.5 x lambda*, lambda* + 5]; the
// adaptive search bisects to a 10% bracket: its knee within 15% of the
// measured capacity; the closed-loop knee is exact (S users). Every run is
// 2-3 s; the suite takes about 40-50 s.
import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runBin } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-sweep-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const T_STEP = 0.05 + 20; // ms
const T_REQ = 10 * T_STEP / 1000; // s
const S = 4;
const LAMBDA_STAR = S / T_REQ; // 19.95 req/s

const SIM = ['--sim-profile', 'tiny', '--sim-set', `max_num_seqs=${S}`,
  '--sim-set', 't_w_ms=20', '--input-len', 'fixed:16', '--output-len', 'fixed:10',
  '--drain', '10s', '--workers', '1'];

// Runs `tokenstorm sweep ARGS`; resolves with { code, signal, stdout, stderr, ms }.
const sweep = (args, opts) => runBin(['sweep', ...args], opts);

const readSweep = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'sweep.json'), 'utf8'));

describe('sweep', { concurrency: 2 }, () => {
  test('rate list: stops climbing at saturation, knee and SLO bracket at the model capacity', async () => {
    const out = path.join(tmp, 'list');
    const r = await sweep(['--rates', '10,15,20,25,30,35', '--past-saturation', '1',
      '--slo', 'ttft.p99<150ms', '--out', out, '-q',
      '--', ...SIM, '--arrival', 'constant', '--duration', '3s']);
    assert.equal(r.code, 0, r.stderr);
    const s = readSweep(out);
    assert.equal(s.schema, 'tokenstorm.sweep/1');
    assert.equal(s.mode, 'rate');
    assert.deepEqual(s.slo, ['ttft.p99<150ms']);
    assert.equal(s.target, 'simulator:tiny');
    const loads = s.steps.map((x) => x.load);
    // the grid is climbed in order up to the first saturated step and one
    // more (--past-saturation 1), which is saturated too, and no further
    assert.deepEqual(loads, [10, 15, 20, 25, 30, 35].slice(0, loads.length));
    const first = s.steps.findIndex((x) => x.saturated);
    assert.equal(first, s.steps.length - 2, r.stdout);
    assert.equal(s.steps.at(-1).saturated, true, r.stdout);
    for (const st of s.steps) {
      assert.ok(fs.existsSync(path.join(out, st.dir, 'result.json')), st.dir);
      assert.match(st.dir, /^step-0\d-rate-\d+$/);
      assert.equal(st.offered, st.load);
      assert.equal(st.error_rate, 0);
      assert.equal(st.quality, null);
    }
    // below capacity the achieved rate follows the offered one
    assert.ok(Math.abs(s.steps[0].achieved_rps - 10) < 1, `achieved ${s.steps[0].achieved_rps}`);
    // saturated: the throughput is the server's capacity
    const cap = Math.max(...s.steps.filter((x) => x.saturated).map((x) => x.achieved_rps));
    assert.ok(cap >= 0.75 * LAMBDA_STAR && cap <= 1.05 * LAMBDA_STAR, `capacity ${cap}, model ${LAMBDA_STAR}`);
    // the first saturated load is at or past the capacity (a grid spacing of slack)
    assert.ok(loads[first] >= cap - 5, `first saturated at ${loads[first]}, capacity ${cap}\n${r.stdout}`);
    // the knee
    assert.ok(s.knee, r.stdout);
    assert.equal(s.knee.metric, 'ttft_p99_ms');
    assert.equal(s.knee.method, 'max-curvature');
    assert.ok(Math.abs(s.knee.load - cap) <= 5, `knee ${s.knee.load}, capacity ${cap}\n${r.stdout}`);
    assert.ok(s.knee.load >= 0.5 * LAMBDA_STAR && s.knee.load <= LAMBDA_STAR + 5, `knee ${s.knee.load}`);
    // the SLO bracket (last pass, first failure) is one grid spacing around the
    // capacity (TTFT p99 < 150 ms over 3 s tolerates a slowly growing queue,
    // so the last pass may be a little past the capacity)
    const [pass, fail] = s.max_goodput.bracket;
    assert.equal(fail - pass, 5, r.stdout);
    assert.ok(pass <= 1.1 * LAMBDA_STAR && fail >= 0.75 * cap, `bracket ${pass}..${fail}, capacity ${cap}`);
    assert.equal(s.max_goodput.load, pass);
    assert.equal(s.max_goodput.goodput_rps, s.steps.find((x) => x.load === pass).achieved_rps);
    assert.equal(s.critical_load, null); // no errors: nothing to fit
    assert.equal(s.interference, null);
    assert.match(r.stdout, /knee \(ttft_p99_ms, max curvature\): load \d+ req\/s/);
    assert.match(r.stdout, /max goodput meeting the SLOs: .* at load \d+ req\/s; first failure at \d+/);
  });

  test('concurrency ladder: the closed-loop knee is at max_num_seqs users', async () => {
    const out = path.join(tmp, 'conc');
    const r = await sweep(['--mode', 'concurrency', '--ladder', '1:2:16', '--out', out, '-q',
      '--', ...SIM, '--duration', '2s']);
    assert.equal(r.code, 0, r.stderr);
    const s = readSweep(out);
    assert.equal(s.mode, 'concurrency');
    assert.equal(s.plan, 'ladder');
    // throughput stops growing past 4 users: 8 is saturated, and with the
    // default --past-saturation 1 the sweep runs 16 too (one point past the
    // knee on each side) and stops there
    const loads = s.steps.map((x) => x.load);
    assert.deepEqual(loads, [1, 2, 4, 8, 16], r.stdout);
    assert.deepEqual(s.steps.map((x) => x.saturated), [false, false, false, true, true], r.stdout);
    assert.ok(s.steps.at(-1).saturation.includes('throughput'));
    const cap = s.steps[3].achieved_rps;
    assert.ok(cap >= 0.75 * LAMBDA_STAR && cap <= 1.05 * LAMBDA_STAR, `${cap} vs ${LAMBDA_STAR}`);
    assert.equal(s.knee.load, S, JSON.stringify(s.steps.map((x) => x.ttft_p99_ms)));
    assert.equal(s.max_goodput, null); // no SLOs
    assert.ok(s.steps.every((x) => x.slo_pass === null)); // no verdict, not a vacuous pass
  });

  test('adaptive: probes, a grid below the saturated throughput, bisection to the knee', async () => {
    const out = path.join(tmp, 'adaptive');
    const r = await sweep(['--adaptive', '--adaptive-points', '3', '--refine', '2', '--sat-concurrency', '64',
      '--slo', 'ttft.p99<150ms', '--out', out, '-q',
      '--', ...SIM, '--arrival', 'constant', '--duration', '3s']);
    assert.equal(r.code, 0, r.stderr);
    const s = readSweep(out);
    assert.equal(s.plan, 'adaptive');
    assert.equal(s.adaptive.baseline.load, 1);
    assert.match(s.adaptive.baseline.dir, /^step-01-baseline-c1$/);
    assert.equal(s.adaptive.saturation.load, 64);
    // one user: one request at a time, 1/T requests per second (less the
    // client's turnaround between requests)
    const b = s.adaptive.baseline.achieved_rps;
    assert.ok(b >= 0.75 / T_REQ && b <= 1.05 / T_REQ, `baseline ${b} req/s, model ${1 / T_REQ}`);
    const sat = s.adaptive.saturation.achieved_rps;
    assert.ok(sat >= 0.75 * LAMBDA_STAR && sat <= 1.05 * LAMBDA_STAR, `saturated ${sat}`);
    // the grid: 3 loads from the baseline's rate to the saturated one
    assert.equal(s.steps[0].load, Math.round(Math.min(Math.max(b, sat / 10), sat / 2) * 100) / 100);
    assert.ok(s.steps.some((x) => Math.abs(x.load - sat) <= 0.01 * sat), `no step at ${sat}: ${r.stdout}`);
    // 2 probes + 3 grid loads + 2 refinements
    assert.equal(s.steps.length, 5, r.stdout);
    const loads = s.steps.map((x) => x.load);
    assert.ok(s.steps.some((x) => x.saturated) && s.steps.some((x) => !x.saturated), r.stdout);
    assert.ok(Math.abs(s.knee.load - sat) <= 0.15 * sat, `knee ${s.knee.load}, capacity ${sat}, steps ${loads}`);
    assert.ok(s.knee.load >= 0.5 * LAMBDA_STAR && s.knee.load <= 1.15 * LAMBDA_STAR);
    // the SLO (TTFT p99 < 150 ms over 3 s) tolerates a slowly growing queue,
    // so its boundary may sit a little past the capacity
    const [pass, fail] = s.max_goodput.bracket;
    assert.ok(pass <= 1.1 * LAMBDA_STAR && fail >= 0.75 * LAMBDA_STAR, `bracket ${pass}..${fail}`);
  });

  test('Ctrl-C: the running step stops, sweep.json keeps the steps so far, exit 130', async () => {
    const out = path.join(tmp, 'sigint');
    let sent = 0;
    const r = await sweep(['--rates', '5,10,15', '--out', out,
      '--', ...SIM, '--duration', '3s'], {
      onStdout: (text, p) => {
        if (!sent && /rate 5 /.test(text)) {
          sent = Date.now();
          setTimeout(() => p.kill('SIGINT'), 1500); // during the second step
        }
      },
    });
    assert.equal(r.code, 130, r.stderr);
    assert.ok(Date.now() - sent < 15000, 'stopped promptly');
    const s = readSweep(out);
    assert.equal(s.interrupted, true);
    assert.equal(s.steps.length, 2);
    assert.equal(s.steps[0].interrupted, false);
    assert.equal(s.steps[1].interrupted, true);
    assert.ok(fs.existsSync(path.join(out, s.steps[1].dir, 'result.json')));
    assert.ok(!fs.existsSync(path.join(out, 'step-03-rate-15')));
  });

  test('interference: a saturating tenant raises the other one\'s TTFT p99', async () => {
    const out = path.join(tmp, 'interference');
    const r = await sweep(['--interference', 'chat=--rate 5', '--interference', 'batch=--rate 40',
      '--out', out, '-q', '--', ...SIM, '--arrival', 'constant', '--duration', '2s']);
    assert.equal(r.code, 0, r.stderr);
    const s = readSweep(out);
    assert.equal(s.steps.length, 0);
    assert.equal(s.interference.length, 2);
    const [chat, batch] = s.interference;
    assert.equal(chat.victim, 'chat');
    assert.equal(chat.aggressor, 'batch');
    assert.equal(chat.metric, 'ttft_p99_ms');
    // alone, 5 req/s on a 19.95 req/s server queues nothing (two steps or so);
    // with 40 req/s more the server is past capacity and chat queues too
    assert.ok(chat.p99_with_ms > 3 * chat.p99_alone_ms, `alone ${chat.p99_alone_ms}, with ${chat.p99_with_ms}`);
    assert.ok(chat.delta > 2);
    assert.ok(Math.abs(chat.delta - (chat.p99_with_ms - chat.p99_alone_ms) / chat.p99_alone_ms) < 1e-9);
    assert.equal(batch.victim, 'batch');
    for (const d of [chat.dir_alone, chat.dir_with, batch.dir_alone, batch.dir_with])
      assert.ok(fs.existsSync(path.join(out, d, 'result.json')), d);
    assert.match(r.stdout, /interference: chat's ttft_p99_ms .* alone, .* with batch/);
  });

  test('usage errors: conflicting run options and a bad plan exit 2 before any run', async () => {
    let r = await sweep(['--rates', '5', '--out', path.join(tmp, 'u1'), '--', '--rate', '3']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--rate cannot be passed/);
    r = await sweep(['--ladder', '4:1:8', '--', '--duration', '1s']);
    assert.equal(r.code, 2);
    r = await sweep(['--rates', '5', '--', '--no-such-option']);
    assert.equal(r.code, 2, r.stderr);
  });
});

// Issue 14: the sweep's headline is right and stable. Three adaptive sweeps
// of the same server (run at once: the simulator is mostly idle between its
// 20 ms steps) must agree on the maximum goodput within 10% of each other
// and land within 15% of the model's capacity lambda* = S / T; and a step far
// below capacity, with requests long compared with its window (2 s requests,
// Poisson arrivals at 1.5 req/s against a capacity of 32 req/s: seconds
// with no send, requests still in flight at every moment), is never
// saturated. About 25-35 s in all.
describe('sweep headline (issue 14)', { concurrency: 1 }, () => {
  test('adaptive sweep x3: max goodput stable and at the capacity; a low step never saturated', async () => {
    const runs = [0, 1, 2].map((i) => sweep(['--adaptive', '--adaptive-points', '3', '--refine', '4',
      '--tolerance', '0.05', '--sat-concurrency', '64', '--slo', 'ttft.p99<150ms',
      '--out', path.join(tmp, `stable-${i}`), '-q',
      '--', ...SIM, '--arrival', 'constant', '--duration', '2s', '--seed', String(11 + i)],
    { timeoutMs: 90000 }));
    const LONG = ['--sim-profile', 'tiny', '--sim-set', 'max_num_seqs=64', '--sim-set', 't_w_ms=20',
      '--input-len', 'fixed:16', '--output-len', 'fixed:100', '--drain', '10s', '--workers', '1'];
    const low = sweep(['--rates', '1.5,1.6,1.7', '--past-saturation', '0', '--out', path.join(tmp, 'low'), '-q',
      '--', ...LONG, '--duration', '8s'], { timeoutMs: 90000 });
    const rs = await Promise.all([...runs, low]);
    const goodputs = [];
    for (let i = 0; i < 3; i++) {
      assert.equal(rs[i].code, 0, rs[i].stderr);
      const s = readSweep(path.join(tmp, `stable-${i}`));
      assert.ok(s.max_goodput, rs[i].stdout);
      goodputs.push(s.max_goodput.goodput_rps);
      // each step ran with its own seed, recorded, and says what it sent
      const seeds = s.steps.map((x) => x.seed);
      assert.equal(new Set(seeds).size, seeds.length, `seeds ${seeds}`);
      for (const st of s.steps) {
        const res = JSON.parse(fs.readFileSync(path.join(tmp, `stable-${i}`, st.dir, 'result.json'), 'utf8'));
        assert.equal(res.run.seed, st.seed);
        assert.equal(st.rates_from, 'window');
        assert.ok(st.sent_rps > 0.8 * st.load && st.sent_rps < 1.2 * st.load, `sent ${st.sent_rps} at ${st.load}`);
      }
    }
    const lo = Math.min(...goodputs);
    const hi = Math.max(...goodputs);
    assert.ok(hi <= 1.1 * lo, `max goodput ${goodputs} differ by more than 10%`);
    for (const g of goodputs)
      assert.ok(Math.abs(g - LAMBDA_STAR) <= 0.15 * LAMBDA_STAR, `max goodput ${goodputs}, capacity ${LAMBDA_STAR}`);
    // far below capacity: no step is saturated, and all three ran
    assert.equal(rs[3].code, 0, rs[3].stderr);
    const s = readSweep(path.join(tmp, 'low'));
    assert.deepEqual(s.steps.map((x) => x.load), [1.5, 1.6, 1.7], rs[3].stdout);
    for (const st of s.steps) {
      assert.deepEqual(st.saturation, [], `${st.load}: ${JSON.stringify(st.signals)}\n${rs[3].stdout}`);
      // achieved counts what completed inside the 8 s window: it follows what was sent
      assert.ok(Math.abs(st.achieved_rps - st.sent_rps) <= 0.35 * st.sent_rps + 0.3,
        `achieved ${st.achieved_rps}, sent ${st.sent_rps}`);
    }
  });
});
