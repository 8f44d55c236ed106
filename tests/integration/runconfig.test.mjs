// What result.json records of a run (the effective options, the redacted
// command line, the client host) and `tokenstorm compare`'s warning when two
// runs were configured differently: two short runs against the built-in
// simulator that differ only in --rate, one more like the first, and runs
// stopped by SIGINT and SIGTERM.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, runBin } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-runconfig-'));
const KEY = 'sk-integration-key-0123';

const ts = runBin;

const runArgs = (out, rate) => ['run', '--rate', String(rate), '--requests', '6', '--input-len',
  'fixed:16', '--output-len', 'fixed:4', '--workers', '1', '--seed', '3', '-q', '--out', out,
  '--api-key', KEY, '--header', 'Authorization: Bearer x', '--header', 'X-Tenant: t1',
  '--sim-profile', 'tiny'];
const dirs = { a: path.join(tmp, 'a'), b: path.join(tmp, 'b'), c: path.join(tmp, 'c') };

before(async () => {
  const env = { ...process.env };
  delete env.OPENAI_API_KEY;
  for (const [k, rate] of [['a', 20], ['b', 40], ['c', 20]]) {
    const r = await ts(runArgs(dirs[k], rate), { env });
    assert.equal(r.code, 0, r.stderr);
  }
});

after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test('result.json records the options, the command line redacted, and the host', () => {
  const text = fs.readFileSync(path.join(dirs.a, 'result.json'), 'utf8');
  assert.ok(!text.includes(KEY), 'the API key is in result.json');
  assert.ok(!text.includes('Bearer x'), 'the Authorization value is in result.json');
  const run = JSON.parse(text).run;
  assert.equal(run.mode, 'open');
  assert.equal(run.rate, 20);
  assert.equal(run.seed, 3);
  assert.equal(run.workers, 1);
  assert.deepEqual(run.headers, ['Authorization', 'X-Tenant']);
  assert.equal(run.api_key_set, true);
  assert.equal(run.interrupted, false);
  assert.equal(run.interrupted_by, null);
  assert.equal(typeof run.drain_s, 'number');
  assert.equal(typeof run.timeouts.connect_s, 'number');
  const cl = run.command_line;
  assert.equal(cl[0], 'tokenstorm');
  assert.equal(cl[cl.indexOf('--api-key') + 1], '<redacted>');
  assert.ok(cl.includes('Authorization: <redacted>'));
  assert.ok(cl.includes('X-Tenant: t1'));
  assert.ok(run.host.cores >= 1);
  assert.equal(typeof run.host.kernel, 'string');
  assert.equal(run.host.hostname, undefined);
});

test('compare warns that --rate differs, on stderr and in JSON and HTML', async () => {
  const r = await ts(['compare', dirs.a, dirs.b]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /configurations differ in 1 key/);
  assert.match(r.stderr, /\n {2}rate: 20\.0 -> 40\.0\n/);
  const j = await ts(['compare', dirs.a, dirs.b, '--format', 'json']);
  assert.equal(j.code, 0, j.stderr);
  assert.deepEqual(JSON.parse(j.stdout).config_diff, [{ key: 'rate', base: 20, new: 40 }]);
  const h = await ts(['compare', dirs.a, dirs.b, '--format', 'html']);
  assert.equal(h.code, 0, h.stderr);
  assert.match(h.stdout, /id="config-diff"[\s\S]*<td class="m">rate<\/td><td class="m">20\.0<\/td><td class="m">40\.0<\/td>/);
});

test('compare says nothing about two runs configured alike', async () => {
  const r = await ts(['compare', dirs.a, dirs.c]);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /configurations differ/);
  const j = await ts(['compare', dirs.a, dirs.c, '--format', 'json']);
  assert.deepEqual(JSON.parse(j.stdout).config_diff, []);
});

// A run stopped by a signal says which, whatever its exit code.
for (const sig of ['SIGINT', 'SIGTERM']) {
  test(`result.json says the run was interrupted by ${sig}`, async () => {
    const out = path.join(tmp, `sig-${sig}`);
    const p = spawn(BIN, ['run', '--rate', '20', '--duration', '30s', '--drain', '1s',
      '--input-len', 'fixed:16', '--output-len', 'fixed:4', '--workers', '1', '--sim-profile',
      'tiny', '-q', '--out', out], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    p.stderr.on('data', (d) => { stderr += d; });
    const exited = new Promise((resolve) => p.on('exit', (code, signal) => resolve({ code, signal })));
    // the load runs once the result directory exists; give it a moment more
    for (let i = 0; i < 100 && !fs.existsSync(out); i++) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 1000));
    p.kill(sig);
    const guard = setTimeout(() => p.kill('SIGKILL'), 20000);
    const { signal } = await exited;
    clearTimeout(guard);
    assert.equal(signal, null, stderr);
    const run = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8')).run;
    assert.equal(run.interrupted, true);
    assert.equal(run.interrupted_by, sig);
  });
}
