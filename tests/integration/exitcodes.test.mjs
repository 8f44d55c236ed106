// Exit codes a CI can rely on (issue 15): a run in which no request
// succeeded exits 3 and names the dominant error; SIGTERM exits 143 and
// SIGINT 130 with the results so far written; SLOs that cannot be evaluated
// with the given options are usage errors before any load. Every target is
// on 127.0.0.1; every process is bounded in time.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { runBin, startSim, sleep } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-exit-'));
let sim;

before(async () => {
  sim = await startSim(['--profile', 'tiny', '--no-noise']);
});
after(async () => {
  if (sim) await sim.stop('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

const ts = runBin;

// A port on 127.0.0.1 with nothing listening: bound, noted, closed.
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// A tiny HTTP server on 127.0.0.1 port 0 answering every request with handler.
function serve(handler) {
  return new Promise((resolve) => {
    const srv = http.createServer(handler);
    srv.listen(0, '127.0.0.1', () => resolve(srv));
  });
}

const result = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'result.json'), 'utf8'));
const load = ['--model', 'm', '--rate', '20', '--requests', '10', '--duration', '5s', '-q'];

test('nothing listening: exit 3, the dominant error named, result.json written', async () => {
  const port = await freePort();
  const out = path.join(tmp, 'refused');
  const r = await ts(['run', '--target', `http://127.0.0.1:${port}/v1`, ...load, '--out', out]);
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /no request succeeded: 10 of 10 failed, most as connect \(10\): .*refused/i);
  const res = result(out);
  assert.equal(res.summary.completed, 0);
  assert.match(res.no_success, /most as connect \(10\)/);
});

test('a server answering 501: exit 3, most as http_5xx', async () => {
  const srv = await serve((req, res) => {
    req.resume();
    res.writeHead(501, { 'content-type': 'application/json' });
    res.end('{"error":{"message":"not implemented","type":"server_error","code":"not_implemented"}}');
  });
  try {
    const out = path.join(tmp, '501');
    const r = await ts(['run', '--target', `http://127.0.0.1:${srv.address().port}/v1`, ...load,
      '--out', out]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /no request succeeded: 10 of 10 failed, most as http_5xx \(10\)/);
  } finally {
    srv.close();
  }
});

test('every stream cut short: exit 3, most as truncated', async () => {
  const srv = await serve((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m",' +
      '"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n');
    setTimeout(() => res.socket.destroy(), 20);
  });
  try {
    const out = path.join(tmp, 'truncated');
    const r = await ts(['run', '--target', `http://127.0.0.1:${srv.address().port}/v1`, ...load,
      '--out', out]);
    assert.equal(r.code, 3, r.stderr);
    assert.match(r.stderr, /no request succeeded: 10 of 10 failed, most as truncated \(10\)/);
  } finally {
    srv.close();
  }
});

test('a run whose requests all fell in the warm-up: exit 3, nothing was measured', async () => {
  const out = path.join(tmp, 'warmup-only');
  const r = await ts(['run', '--target', sim.base, '--rate', '20',
    '--requests', '4', '--warmup', '3s', '-q', '--out', out]);
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /no request was measured: all 4 requests were sent during the warm-up \(4 ok\)/);
});

test('the same load against the simulator still exits 0', async () => {
  const r = await ts(['run', '--target', sim.base, '--rate', '20',
    '--requests', '10', '-q', '--out', path.join(tmp, 'ok')]);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /no request/);
});

test('a scenario class with no success: exit 3 naming the class', async () => {
  const f = path.join(tmp, 'broken.yaml');
  fs.writeFileSync(f, `
seed: 3
duration: 2s
classes:
  - name: good
    rate: 10
    input_tokens: fixed:16
    output_tokens: fixed:4
  - name: broken
    rate: 10
    input_tokens: fixed:16
    output_tokens: fixed:4
    body: {max_tokens: -5}
`);
  const out = path.join(tmp, 'scn');
  const r = await ts(['run', f, '--target', sim.base, '-q', '--out', out]);
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /class 'broken': no request succeeded: \d+ of \d+ failed, most as http_4xx/);
  const res = result(out);
  assert.ok(res.classes.find((c) => c.name === 'good').summary.completed > 0);
});

for (const [sig, code] of [['SIGTERM', 143], ['SIGINT', 130]]) {
  test(`run: ${sig} exits ${code} with the results so far`, async () => {
    const out = path.join(tmp, `sig-run-${code}`);
    const r = await ts(['run', '--target', sim.base, '--rate', '10',
      '--duration', '60s', '-q', '--out', out], {
      onStart: (p) => setTimeout(() => p.kill(sig), 2500),
    });
    assert.equal(r.signal, null, r.stderr);
    assert.equal(r.code, code, r.stderr);
    const res = result(out);
    assert.ok(res.summary.requests > 0, JSON.stringify(res.summary));
  });

  test(`sweep: ${sig} exits ${code}`, async () => {
    const out = path.join(tmp, `sig-sweep-${code}`);
    const r = await ts(['sweep', '--rates', '2,4,8', '-q', '--out', out, '--',
      '--target', sim.base, '--duration', '30s'], {
      onStart: (p) => setTimeout(() => p.kill(sig), 3000),
      timeoutMs: 60000,
    });
    assert.equal(r.signal, null, r.stderr);
    assert.equal(r.code, code, r.stderr);
  });
}

test('sweep: a step in which no request succeeded is kept, the sweep goes on', async () => {
  const port = await freePort();
  const out = path.join(tmp, 'sweep-refused');
  const r = await ts(['sweep', '--rates', '5,10', '-q', '--out', out, '--',
    '--target', `http://127.0.0.1:${port}/v1`, '--model', 'm', '--duration', '1s']);
  assert.doesNotMatch(r.stderr, /the run failed/, r.stderr);
  assert.match(r.stderr, /no request succeeded at this load/);
  const sw = JSON.parse(fs.readFileSync(path.join(out, 'sweep.json'), 'utf8'));
  assert.equal(sw.steps.length, 2, JSON.stringify(sw).slice(0, 2000));
});

test('an SLO the options cannot evaluate is a usage error before any load', async () => {
  let seen = 0;
  const srv = await serve((req, res) => { seen++; req.resume(); res.writeHead(500); res.end(); });
  try {
    const target = `http://127.0.0.1:${srv.address().port}/v1`;
    const cases = [
      ['goodput>5', /--slo 'goodput>5': goodput needs --goodput/],
      ['rouge_l>=0.3', /--slo 'rouge_l>=0.3': rouge_l needs reference answers/],
      ['regex_match>=90%', /regex_match needs --quality-regex/],
      ['json_valid>=90%', /json_valid needs --quality-json/],
      ['dual_sla>=90%', /dual_sla needs --dual-sla/],
      ['consistency>0.5', /consistency needs --consistency/],
    ];
    for (const [slo, re] of cases) {
      const r = await ts(['run', '--target', target, ...load, '--slo', slo,
        '--out', path.join(tmp, 'slo-usage')]);
      assert.equal(r.code, 2, `${slo}: ${r.stderr}`);
      assert.match(r.stderr, re, slo);
    }
    assert.equal(seen, 0, 'no request reached the target');
  } finally {
    srv.close();
  }
  // with what they need, they are judged: a score prints as a score
  const r = await ts(['run', '--target', sim.base, '--rate', '20', '--requests', '10',
    '--goodput', 'ttft:60000', '--slo', 'goodput>0', '--slo', 'throughput>0',
    '--out', path.join(tmp, 'slo-ok')]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /goodput>0\s+\S+\/s\s+pass/);
  assert.match(r.stdout, /throughput>0\s+\S+\/s\s+pass/);
});

test('SLOs of a scenario class, a chaos probe and a sweep are refused at start too', async () => {
  let seen = 0;
  const srv = await serve((req, res) => { seen++; req.resume(); res.writeHead(500); res.end(); });
  try {
    const target = `http://127.0.0.1:${srv.address().port}/v1`;
    // a scenario class's slos: goodput needs the class's goodput:
    const scn = path.join(tmp, 'slo-class.yaml');
    fs.writeFileSync(scn, `name: t\ntarget: {url: "${target}", model: m}\nduration: 5s\n` +
      'classes:\n  - name: chat\n    rate: 10\n    slos: ["ttft.p95<1s", "goodput>=1"]\n' +
      '  - name: bulk\n    rate: 5\n    goodput: "e2el:60000"\n    slos: ["goodput>=1"]\n');
    const out = path.join(tmp, 'slo-class-out');
    for (const args of [['run', scn, '-q', '--out', out], ['run', scn, '--check']]) {
      const r = await ts(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr,
        /class 'chat': slo 'goodput>=1': goodput needs the class's goodput:/, r.stderr);
    }
    assert.equal(fs.existsSync(out), false, 'no result directory claimed');

    // a chaos probe: goodput needs the load's --goodput (--check and the run itself)
    const exp = path.join(tmp, 'slo-probe.json');
    fs.writeFileSync(exp, JSON.stringify({
      title: 'probe', hypothesis: { probes: [{ slo: 'ttft.p95<2s' }, { slo: 'goodput>=1' }] },
      method: [{ name: 'e', at: '2s', for: '2s', sim: 'http://127.0.0.1:1',
        fault: { type: 'error_rate', rate: 1 } }],
      load: ['--target', target, '--model', 'm', '--rate', '10', '--duration', '8s'],
    }));
    const cout = path.join(tmp, 'slo-probe-out');
    for (const args of [['chaos', '--check', exp], ['chaos', exp, '--out', cout]]) {
      const r = await ts(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /probe 'goodput>=1': goodput needs the load's --goodput/, r.stderr);
    }
    assert.equal(fs.existsSync(cout), false, 'no experiment directory claimed');

    // sweep: before the first step, the run options after -- are what the runs get
    const sout = path.join(tmp, 'slo-sweep-out');
    for (const [slo, re] of [['goodput>=1', /--slo 'goodput>=1': goodput needs --goodput/],
      ['json_valid>=90%', /--slo 'json_valid>=90%': json_valid needs --quality-json/]]) {
      const r = await ts(['sweep', '--rates', '2,4', '--slo', slo, '-q', '--out', sout, '--',
        '--target', target, '--model', 'm', '--duration', '2s']);
      assert.equal(r.code, 2, `${slo}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, re, r.stderr);
      assert.doesNotMatch(r.stderr, /step-01/, 'no step started');
    }
    assert.equal(fs.existsSync(sout), false, 'no sweep directory claimed');
    assert.equal(seen, 0, 'no request reached the target');
  } finally {
    srv.close();
  }
  // given what they need, they pass the check (the sweep's steps then run as before)
  const ok = path.join(tmp, 'slo-probe-ok.json');
  fs.writeFileSync(ok, JSON.stringify({
    title: 'probe', hypothesis: { probes: [{ slo: 'goodput>=1' }] },
    method: [{ name: 'e', at: '2s', for: '2s', sim: 'http://127.0.0.1:1',
      fault: { type: 'error_rate', rate: 1 } }],
    load: ['--rate', '10', '--duration', '8s', '--goodput', 'e2el:60000'],
  }));
  const r = await ts(['chaos', '--check', ok]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
});
