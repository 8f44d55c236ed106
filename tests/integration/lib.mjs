// Helpers for integration tests: start the real tokenstorm binary on a
// loopback port and talk to it. Every process is killed when a test ends and
// every wait is bounded.
import { spawn } from 'node:child_process';
import net from 'node:net';

export const BIN = process.env.TOKENSTORM_BIN || new URL('../../build/tokenstorm', import.meta.url).pathname;

// Starts `tokenstorm sim ARGS` on 127.0.0.1 port 0; resolves when it prints
// its listen address. The returned object has base (URL), port, proc, output
// (everything printed so far) and stop(signal) -> exit code.
export function startSim(args = [], { timeoutMs = 10000 } = {}) {
  return startServer(['sim', '--listen', '127.0.0.1:0', ...args], timeoutMs);
}

// Runs BIN with ARGS to its end; resolves (never rejects) with
// { code, signal, stdout, stderr, ms }, ms being the wall time from spawn to
// exit. The process is killed with SIGKILL after timeoutMs. Options: env
// (the whole environment; default this process's), cwd, bin (another program
// to run instead of BIN), onStart(proc) once it is spawned, onStdout(stdout so
// far, proc) on each piece of standard output, onStderr likewise.
export function runBin(args, { env, cwd, timeoutMs = 60000, bin = BIN, onStart, onStdout, onStderr } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env, cwd });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; if (onStdout) onStdout(stdout, p); });
    p.stderr.on('data', (d) => { stderr += d; if (onStderr) onStderr(stderr, p); });
    const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - t0 });
    });
    if (onStart) onStart(p);
  });
}

export function startServer(argv, timeoutMs = 10000) {
  return new Promise((resolve, reject) => {
    const proc = spawn(BIN, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    const srv = { proc, output: '', stderr: '', exited: null };
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`server did not start in ${timeoutMs} ms: ${srv.output}${srv.stderr}`));
    }, timeoutMs);
    const exited = new Promise((res) => proc.on('exit', (code, sig) => { srv.exited = { code, sig }; res(srv.exited); }));
    srv.stop = async (signal = 'SIGTERM', waitMs = 10000) => {
      if (!srv.exited) proc.kill(signal);
      const t = setTimeout(() => proc.kill('SIGKILL'), waitMs);
      const r = await exited;
      clearTimeout(t);
      return r;
    };
    srv.waitExit = () => exited;
    proc.stderr.on('data', (d) => { srv.stderr += d; });
    proc.stdout.on('data', (d) => {
      srv.output += d;
      const m = srv.output.match(/listening on http:\/\/([0-9.:\[\]]+):(\d+)/);
      if (m && !srv.port) {
        clearTimeout(timer);
        srv.port = Number(m[2]);
        srv.base = `http://127.0.0.1:${srv.port}`;
        resolve(srv);
      }
    });
    proc.on('exit', (code) => {
      if (!srv.port) {
        clearTimeout(timer);
        reject(new Error(`server exited with ${code}: ${srv.output}${srv.stderr}`));
      }
    });
  });
}

// The control API URL a started proxy printed ("control API on http://..."),
// waited for up to 2 s.
export async function controlApi(srv) {
  for (let i = 0; i < 100 && !/control API on http/.test(srv.output); i++) await sleep(20);
  const m = srv.output.match(/control API on (http:\/\/127\.0\.0\.1:\d+)/);
  if (!m) throw new Error(`no control API in: ${srv.output}`);
  return m[1];
}

export async function postJson(base, path, body, headers = {}) {
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(20000),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, text, json };
}

// Splits an SSE body into the data fields of its events (simple: the
// simulator only sends `data:` lines).
export function sseData(text) {
  return text.split('\n\n').filter((e) => e.length).map((e) => {
    const lines = e.split('\n').filter((l) => l.startsWith('data:'));
    return lines.map((l) => l.slice(5).replace(/^ /, '')).join('\n');
  });
}

// Opens a raw TCP connection; resolves with the socket.
export function connectRaw(port) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// mulberry32: a small seeded generator (floats in [0, 1)), so a test's
// generated data is the same every run
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
