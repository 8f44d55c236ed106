// A flow in which every iteration fails while every HTTP call returns 200
// (an agent scenario against a server without tool calling) says why, leads
// with its iterations in the console and result.json, and exits 3.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { runBin } from './lib.mjs';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-flowfail-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const run = (args, { timeoutMs = 60000 } = {}) => runBin(['run', ...args], { timeoutMs });

// examples/scenarios/agent.yaml's flow, bounded to 6 iterations
const agentYaml = `name: agent
seed: 11
classes:
  - name: agent
    users: 2
    requests: 6
    prompts:
      intents:
        - name: lookup
          template: "Look up {{thing}} and summarise it."
          slots:
            thing: [the KV cache, continuous batching]
    flow:
      steps:
        - name: plan
          kind: chat
          body:
            stream: false
            messages: [{role: user, content: "{{prompt}}"}]
            tools:
              - type: function
                function: {name: search_docs, parameters: {type: object, properties: {query: {type: string}}}}
            max_tokens: 16
          capture:
            call_id: /choices/0/message/tool_calls/0/id
        - name: answer
          kind: chat
          depends_on: [plan]
          body:
            messages: [{role: user, content: "{{prompt}} {{call_id}}"}]
            max_tokens: 16
`;

// a chat server that answers every request with text, never a tool call
async function withServer(fn) {
  let calls = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      calls++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'c', object: 'chat.completion', created: 1, model: 'm',
        choices: [{ index: 0, message: { role: 'assistant', content: 'I cannot call tools.' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    return await fn(`http://127.0.0.1:${server.address().port}`, () => calls);
  } finally {
    server.close();
    server.closeAllConnections();
  }
}

test('an agent flow whose every iteration fails its check says why and exits 3', async () => {
  await withServer(async (target, calls) => {
    const f = path.join(tmp, 'agent.yaml');
    fs.writeFileSync(f, agentYaml);
    const out = path.join(tmp, 'out');
    const r = await run(['--target', target, '--model', 'm', '--duration', '20s', '--out', out, f]);
    assert.equal(calls(), 6, 'one plan call per iteration, never the answer step');
    // every HTTP call was ok, and still the run could not show the flow works
    assert.equal(r.code, 3, r.stdout + r.stderr);
    const why = "step 'plan': capture 'call_id' (/choices/0/message/tool_calls/0/id) found nothing in the response";
    assert.ok(r.stderr.includes(`class 'agent': no iteration succeeded: 6 of 6 failed, most as ${why} (6)`), r.stderr);
    // the console leads the class with its iterations and the reason
    const cls = r.stdout.slice(r.stdout.indexOf('== class agent'));
    assert.match(cls, /\niterations +6: 0 ok, 0 degraded, 6 failed \(100\.00%\)/);
    assert.ok(cls.includes(`  failed     6  ${why}`), cls);
    assert.ok(cls.indexOf('\niterations') < cls.indexOf('\nrequests'), cls);
    assert.match(cls, /no iteration succeeded/);
    // result.json: the class leads with its iterations and their reasons
    const res = JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
    assert.match(res.no_success, /no iteration succeeded/);
    const c = res.classes[0];
    assert.deepEqual(Object.keys(c).slice(0, 2), ['name', 'iterations']);
    assert.equal(c.iterations.failed, 6);
    assert.deepEqual(c.iterations.failure_reasons, [{ count: 6, message: why }]);
    assert.equal(c.summary.completed, 6); // the HTTP calls themselves were ok
  });
});
