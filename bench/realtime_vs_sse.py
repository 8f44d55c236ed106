#!/usr/bin/env python3
"""realtime_vs_sse: the client's CPU per streamed token over WebSocket
(OpenAI Realtime events, `run --endpoint realtime`) against SSE (`--endpoint
chat`) on the same workload, in one run each, one after the other.

The simulator (tiny profile, a fast engine) is pinned to core 0 and
`tokenstorm run --workers 1` to core 1: a closed loop of USERS users, each
request asking for TOKENS tokens (ignore_eos), for DURATION seconds. The
client's CPU is its user + system time from getrusage of the finished child;
deltas are the content chunks (one per token on both transports). Figures:
deltas per client CPU-second, CPU per 1,000 deltas, TTFT and ITL p50/p99,
and the ratio WebSocket / SSE.
Usage: realtime_vs_sse.py [--quick]
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import tempfile

import common as c


def one(sim, endpoint, users, tokens, duration):
    out = tempfile.mkdtemp(prefix="bench-rt-", dir=c.OUT)
    argv = c.pinned(c.CLIENT_CORE, [c.TOKENSTORM, "run", "--target", sim.url, "--workers", "1",
                                    "--endpoint", endpoint, "--concurrency", str(users),
                                    "--duration", "%ds" % duration, "--input-len", "fixed:10",
                                    "--output-len", "fixed:%d" % tokens, "--out", out, "-q"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=duration + 60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(os.path.join(out, "result.json")) as f:
            res = json.load(f)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if r.returncode not in (0, 1):
        raise RuntimeError("%s: tokenstorm run exited %d: %s" % (endpoint, r.returncode,
                                                                 r.stderr[-500:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    deltas = res["tokens"]["content_chunks"]
    lat = res["latency"]
    return {
        "endpoint": endpoint,
        "completed": res["summary"]["completed"],
        "failed": res["summary"]["failed"],
        "deltas": deltas,
        "client_cpu_s": round(cpu, 3),
        "deltas_per_cpu_s": round(deltas / cpu) if cpu else None,
        "cpu_ms_per_1000_deltas": round(cpu / deltas * 1e6, 3) if deltas else None,
        "ttft_p50_ms": lat.get("ttft", {}).get("p50"),
        "ttft_p99_ms": lat.get("ttft", {}).get("p99"),
        "itl_p50_ms": lat.get("itl", {}).get("p50"),
        "itl_p99_ms": lat.get("itl", {}).get("p99"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    c.ensure_built()
    users, tokens, duration = (50, 200, 4) if a.quick else (200, 500, 15)
    rows = []
    with c.Sim(sets=c.FAST_ENGINE + ["t_w_ms=2"]) as sim:
        for ep in ("chat", "realtime"):
            c.wait_quiet()
            row = one(sim, ep, users, tokens, duration)
            c.log("%-8s %8s deltas/CPU-s, %6.3f ms CPU per 1000 deltas, TTFT p99 %s ms, "
                  "ITL p99 %s ms (%d ok, %d failed)" % (
                      ep, row["deltas_per_cpu_s"], row["cpu_ms_per_1000_deltas"] or 0,
                      row["ttft_p99_ms"], row["itl_p99_ms"], row["completed"], row["failed"]))
            rows.append(row)
    sse, ws = rows
    ratio = (ws["deltas_per_cpu_s"] / sse["deltas_per_cpu_s"]
             if ws["deltas_per_cpu_s"] and sse["deltas_per_cpu_s"] else None)
    c.log("WebSocket / SSE deltas per CPU-second: %s" % (round(ratio, 3) if ratio else "-"))
    c.write_result("realtime_vs_sse", {
        "users": users, "tokens_per_request": tokens, "duration_s": duration,
        "machine": c.machine(), "runs": rows, "ws_over_sse": ratio,
    })


if __name__ == "__main__":
    main()
