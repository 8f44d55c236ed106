// pgvector through libpq against a real PostgreSQL: PGlite (WASM PostgreSQL
// with its bundled vector extension) served over the wire protocol by
// pglite-socket, in this process. tokenstorm's recall@10 rises with
// ivfflat.probes and is 1 when every list is probed (pgvector's own exact
// answer agrees with tokenstorm's ground truth).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite/vector';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { runBin, rng } from '../integration/lib.mjs';

const N = 2000, DIM = 16, NQ = 50, LISTS = 32;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-pgvector-'));
let db, server, url;

function vectors(n, seed) {
  const r = rng(seed);
  return Array.from({ length: n }, () => Array.from({ length: DIM }, () => Math.round((2 * r() - 1) * 1e4) / 1e4));
}

function writeFvecs(file, rows) {
  const buf = Buffer.alloc(rows.length * (DIM + 1) * 4);
  rows.forEach((row, i) => {
    buf.writeInt32LE(DIM, i * (DIM + 1) * 4);
    row.forEach((x, d) => buf.writeFloatLE(x, i * (DIM + 1) * 4 + 4 + d * 4));
  });
  fs.writeFileSync(file, buf);
}

const corpus = vectors(N, 1);
const queries = vectors(NQ, 2);

before(async () => {
  writeFvecs(path.join(tmp, 'corpus.fvecs'), corpus);
  writeFvecs(path.join(tmp, 'queries.fvecs'), queries);
  db = await PGlite.create({ extensions: { vector } });
  await db.exec(`CREATE EXTENSION IF NOT EXISTS vector; CREATE TABLE items (id int PRIMARY KEY, embedding vector(${DIM}));`);
  for (let i = 0; i < N; i += 500) {
    const rows = corpus.slice(i, i + 500).map((v, j) => `(${i + j}, '[${v.join(',')}]')`);
    await db.exec(`INSERT INTO items VALUES ${rows.join(',')}`);
  }
  await db.exec(`CREATE INDEX ON items USING ivfflat (embedding vector_l2_ops) WITH (lists = ${LISTS})`);
  server = new PGLiteSocketServer({ db, port: 0, host: '127.0.0.1' });
  await server.start();
  url = `postgresql://postgres:postgres@${server.getServerConn()}/postgres?sslmode=disable`;
});

after(async () => {
  if (server) await server.stop();
  if (db) await db.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function pgRun(probes, name) {
  const out = path.join(tmp, name);
  const r = await runBin(['run', '--endpoint', 'vector-search', '--target', url,
    '--vector-data', path.join(tmp, 'corpus.fvecs'), '--vector-queries', path.join(tmp, 'queries.fvecs'),
    '--nprobe', String(probes), '--requests', String(NQ), '--out', out, '-q'], { timeoutMs: 120000 });
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(fs.readFileSync(path.join(out, 'result.json'), 'utf8'));
}

test('recall@10 through libpq rises with ivfflat.probes and is exact with every list', async (t) => {
  const one = await pgRun(1, 'p1');
  const all = await pgRun(LISTS, 'pall');
  t.diagnostic(`recall@10: probes 1 ${one.vector_search.recall_mean}, probes ${LISTS} ${all.vector_search.recall_mean}`);
  assert.equal(one.vector_search.searches, NQ);
  assert.equal(all.vector_search.recall_mean, 1);
  assert.ok(one.vector_search.recall_mean < 0.9, String(one.vector_search.recall_mean));
  assert.equal(all.outcomes.ok, NQ);
  // the password in the connection string never reaches the result
  assert.doesNotMatch(JSON.stringify(all), /postgres:postgres@/);
});

test('a bad table name is refused before connecting; a missing table is a failed run', async () => {
  const bad = await runBin(['run', '--endpoint', 'vector-search', '--target', url, '--pg-table', 'items;drop',
    '--vector-data', path.join(tmp, 'corpus.fvecs'), '--vector-queries', path.join(tmp, 'queries.fvecs'),
    '--requests', '1', '--out', path.join(tmp, 'bad'), '-q'], { timeoutMs: 60000 });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--pg-table/);
  const missing = await runBin(['run', '--endpoint', 'vector-search', '--target', url, '--pg-table', 'nope',
    '--vector-data', path.join(tmp, 'corpus.fvecs'), '--vector-queries', path.join(tmp, 'queries.fvecs'),
    '--requests', '1', '--out', path.join(tmp, 'missing'), '-q'], { timeoutMs: 60000 });
  assert.equal(missing.code, 3);
  assert.match(missing.stderr, /nope/);
});
