#!/usr/bin/env python3
"""fidelity: how closely the client's timestamps match the simulator's truth.

The simulator runs as its own process on core 0 with --trace-log (per request,
CLOCK_MONOTONIC ns: token_ns[i] = when token i was written to the socket).
`tokenstorm run --workers 1 --save-requests` on core 1 holds 1,000 concurrent
streams (closed loop, 1,000 users). Each request is joined to its trace line
by the request id the client sent (X-Request-Id: ts-<run_id>-<index>), and

  first token error = |start_mono_ns + first_chunk_ms * 1e6 - token_ns[0]|
  last token error  = |start_mono_ns + last_chunk_ms  * 1e6 - token_ns[-1]|

(the client's first_chunk is the role chunk, written in the same write as
token 0; its last_chunk is the finish chunk, written right after the last
token). Reports p50/p99/max of both. Target: p99 under 1 ms.
With --endpoint realtime the same requests go over WebSocket (OpenAI
Realtime events; the first chunk is the first text delta, the last chunk the
last delta) and the result is written as fidelity_realtime.
Usage: fidelity.py [--streams 1000] [--tokens-per-s 20] [--length 100] [--endpoint realtime]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import common as c


def quantiles(xs, qs=(0.5, 0.9, 0.99, 0.999)):
    xs = sorted(xs)
    out = {}
    for q in qs:
        i = min(len(xs) - 1, max(0, int(round(q * len(xs) + 0.5)) - 1))
        out["p%g" % (q * 100)] = xs[i] if xs else None
    out["max"] = xs[-1] if xs else None
    out["mean"] = sum(xs) / len(xs) if xs else None
    out["count"] = len(xs)
    return out


def measure(streams, tok_per_s, length, duration, keep=None, endpoint="chat"):
    work = keep or tempfile.mkdtemp(prefix="bench-fid-", dir=c.OUT)
    os.makedirs(work, exist_ok=True)
    trace = os.path.join(work, "trace.jsonl")
    step_ms = 1000.0 / tok_per_s
    sets = c.FAST_ENGINE + ["t_w_ms=%g" % (step_ms - 0.05)]
    c.wait_quiet()
    try:
        with c.Sim(sets=sets, extra=["--trace-log", trace]) as sim:
            busy0 = c.cores_busy_s()
            sim0 = c.proc_cpu_s(sim.pid)
            t = c.Timed(c.pinned(c.CLIENT_CORE, [
                c.TOKENSTORM, "run", "--target", sim.url, "--workers", "1",
                "--endpoint", endpoint,
                "--concurrency", str(streams), "--ramp-users", "2s",
                "--warmup", "%gs" % (length / tok_per_s + 1), "--duration", "%gs" % duration,
                "--output-len", "fixed:%d" % length, "--input-len", "fixed:10",
                "--drain", "%gs" % (length / tok_per_s + 10), "--save-requests",
                "--out", work, "-q"]), stdout=subprocess.DEVNULL).run(timeout=duration + 90)
            busy = c.cores_busy_s() - busy0
            sim_cpu = c.proc_cpu_s(sim.pid) - sim0
        if t.returncode not in (0, 1):
            raise RuntimeError("tokenstorm run exited %d" % t.returncode)
        with open(os.path.join(work, "result.json")) as f:
            run = json.load(f)["run"]
        start_ns, run_id = run["start_mono_ns"], run["run_id"]
        truth = {}
        with open(trace) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("status") == "finished" and r.get("token_ns"):
                    truth[r["request_id"]] = r["token_ns"]
        first, last, missing, n = [], [], 0, 0
        with open(os.path.join(work, "requests.jsonl")) as f:
            for line in f:
                q = json.loads(line)
                if q["warmup"] or q["outcome"] != "ok":
                    continue
                n += 1
                tok = truth.get("ts-%s-%d" % (run_id, q["id"]))
                if tok is None or q["first_chunk_ms"] is None:
                    missing += 1
                    continue
                first.append(abs(start_ns + q["first_chunk_ms"] * 1e6 - tok[0]) / 1e6)
                if q["last_chunk_ms"] is not None and len(tok) == q["output_tokens"]:
                    last.append(abs(start_ns + q["last_chunk_ms"] * 1e6 - tok[-1]) / 1e6)
        lag = run_lag(work)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return {
        "streams": streams, "tokens_per_s_per_stream": tok_per_s, "output_tokens": length,
        "requests_measured": n, "requests_unmatched": missing,
        "first_token_error_ms": quantiles(first), "last_token_error_ms": quantiles(last),
        "client_cpu_s": round(t.cpu_s, 2), "client_wall_s": round(t.wall_s, 2),
        "sim_cpu_s": round(sim_cpu, 2), "run_lag_ms": lag,
        "other_cpu_s": round(busy - t.cpu_s - sim_cpu, 2),
    }


def run_lag(work):
    try:
        with open(os.path.join(work, "result.json")) as f:
            lag = json.load(f)["latency"]["lag"]
        return {k: lag.get(k) for k in ("p50", "p99", "max")}
    except (OSError, ValueError, KeyError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--tokens-per-s", type=float, default=20,
                    help="token rate of each stream (sets the engine's step)")
    ap.add_argument("--length", type=int, default=100, help="output tokens per request")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--endpoint", default="chat", choices=("chat", "realtime"))
    ap.add_argument("--keep", metavar="DIR",
                    help="keep the trace log, requests.jsonl and result.json in DIR")
    a = ap.parse_args()
    c.ensure_built()
    c.log("fidelity: %d streams at %g tokens/s each, %d tokens per request"
          % (a.streams, a.tokens_per_s, a.length))
    m = measure(a.streams, a.tokens_per_s, a.length, a.duration, a.keep, a.endpoint)
    f, l = m["first_token_error_ms"], m["last_token_error_ms"]
    print("fidelity  streams=%d  %d requests joined (%d unmatched)  |client - sim write| ms: "
          "first token p50 %.3f p99 %.3f max %.3f; last token p50 %.3f p99 %.3f max %.3f"
          % (a.streams, f["count"], m["requests_unmatched"], f["p50"], f["p99"], f["max"],
             l["p50"], l["p99"], l["max"]))
    if m["other_cpu_s"] > 1:
        c.log("fidelity: warning: other processes used about %.1f CPU-s on the cores"
              % m["other_cpu_s"])
    sys.stdout.flush()
    c.write_result("fidelity" if a.endpoint == "chat" else "fidelity_" + a.endpoint, {
        "sim": {"profile": "tiny", "set": c.FAST_ENGINE + ["t_w_ms=%g" % (1000 / a.tokens_per_s
                                                                           - 0.05)],
                "core": c.SIM_CORE},
        "client": {"command": "tokenstorm run --workers 1 --endpoint %s --concurrency %d"
                   % (a.endpoint, a.streams),
                   "core": c.CLIENT_CORE},
        "result": m,
    })


if __name__ == "__main__":
    main()
