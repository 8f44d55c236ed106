// Queue limits and shutdown need their own simulator processes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startSim, postJson, sleep } from './lib.mjs';

test('a full waiting queue answers 429 with Retry-After and an OpenAI error', async () => {
  // one sequence at a time, slow steps, a waiting queue of one
  const sim = await startSim(['--profile', 'tiny', '--no-noise', '--set', 'max_num_seqs=1',
    '--set', 'max_waiting=1', '--set', 't_w_ms=50']);
  try {
    const model = (await (await fetch(sim.base + '/v1/models')).json()).data[0].id;
    const body = { model, max_tokens: 20, ignore_eos: true, messages: [{ role: 'user', content: 'x' }] };
    const results = await Promise.all([0, 1, 2, 3].map(async (i) => {
      await sleep(i * 30);
      return postJson(sim.base, '/v1/chat/completions', body);
    }));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 200, 429, 429]);
    const r429 = results.find((r) => r.status === 429);
    assert.ok(Number(r429.headers.get('retry-after')) >= 1);
    assert.equal(r429.json.error.code, 'rate_limit_exceeded');
    assert.equal(r429.json.error.type, 'rate_limit_error');
  } finally {
    await sim.stop('SIGKILL');
  }
});

test('SIGTERM lets an in-flight stream finish and exits 0', async () => {
  const sim = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_w_ms=20', '--grace', '5s']);
  const model = (await (await fetch(sim.base + '/v1/models')).json()).data[0].id;
  const pending = postJson(sim.base, '/v1/chat/completions', {
    model, stream: true, max_tokens: 30, ignore_eos: true, messages: [{ role: 'user', content: 'x' }],
  });
  await sleep(150);
  sim.proc.kill('SIGTERM');
  const res = await pending;
  assert.equal(res.status, 200);
  assert.ok(res.text.trimEnd().endsWith('data: [DONE]'), 'stream was cut');
  const exit = await sim.waitExit();
  assert.equal(exit.code, 0);
});

test('SIGTERM cuts streams that outlive the grace period', async () => {
  const sim = await startSim(['--profile', 'tiny', '--no-noise', '--set', 't_w_ms=50', '--grace', '200ms']);
  const model = (await (await fetch(sim.base + '/v1/models')).json()).data[0].id;
  const pending = fetch(sim.base + '/v1/chat/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream: true, max_tokens: 1000, ignore_eos: true, messages: [{ role: 'user', content: 'x' }] }),
  }).then((r) => r.text()).then(() => 'complete', () => 'cut');
  await sleep(200);
  const t0 = Date.now();
  sim.proc.kill('SIGTERM');
  const exit = await sim.waitExit();
  assert.equal(exit.code, 0);
  assert.ok(Date.now() - t0 < 3000);
  assert.equal(await pending, 'cut');
});
