#!/usr/bin/env python3
"""vector_nprobe: recall@10 against QPS and p99 as IVF's nprobe grows.

The simulator (core 0) holds a generated corpus (clustered Gaussian, seeded)
in a real FAISS index; `tokenstorm run --endpoint vector-search` (core 1,
closed loop) searches it at each nprobe. The first step computes the exact
ground truth (FAISS flat) and saves it; the others read it back
(--vector-truth), so every step's client CPU is the load alone. Reports per
nprobe: recall@10 mean and p5, QPS, latency p50/p99, the client's CPU per
query (queries one client core drives = 1 / that), and the knee of the
recall-QPS curve: the step farthest above the chord from the first to the
last point, with recall and the fraction of QPS lost both scaled to 0..1
(Kneedle's rule).
Usage: vector_nprobe.py [--data gen:50000x64] [--index IVF256,Flat]
       [--nprobe 1,2,4,...] [--concurrency 8] [--duration 8]
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile

import common as c


def knee(points):
    """Index of the knee of (qps, recall) points ordered by rising nprobe."""
    if len(points) < 3:
        return None
    q0, q1 = points[0][0], points[-1][0]
    r0, r1 = points[0][1], points[-1][1]
    if q0 == q1 or r0 == r1:
        return None
    best, at = 0.0, None
    for i, (q, r) in enumerate(points):
        x = (q0 - q) / (q0 - q1)  # fraction of the QPS range given up
        y = (r - r0) / (r1 - r0)  # fraction of the recall range gained
        if y - x > best:
            best, at = y - x, i
    return at


def step(sim, work, nprobe, args, truth):
    out = os.path.join(work, "np%d" % nprobe)
    argv = [c.TOKENSTORM, "run", "--target", sim.url, "--endpoint", "vector-search",
            "--vector-data", args.data, "--nprobe", str(nprobe), "--concurrency",
            str(args.concurrency), "--workers", "1", "--duration", "%gs" % args.duration,
            "--out", out, "--force", "-q"]
    if truth:
        argv += ["--vector-truth", truth]
    c.wait_quiet()
    t = c.Timed(c.pinned(c.CLIENT_CORE, argv), stdout=subprocess.DEVNULL).run(
        timeout=args.duration + 120)
    if t.returncode != 0:
        raise RuntimeError("tokenstorm run exited %d" % t.returncode)
    with open(os.path.join(out, "result.json")) as f:
        doc = json.load(f)
    v = doc["vector_search"]
    row = {"nprobe": nprobe, "recall_mean": v["recall_mean"], "recall_p5": v["recall_p5"],
           "qps": v["qps"], "p50_ms": v["latency_p50_ms"], "p99_ms": v["latency_p99_ms"],
           "searches": v["searches"], "client_cpu_s": t.cpu_s,
           "truth_s": doc["run"]["vector"]["truth_seconds"]}
    row["client_us_per_query"] = 1e6 * t.cpu_s / max(1, v["searches"])
    return row, os.path.join(out, "vector_truth.ivecs")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="gen:50000x64")
    ap.add_argument("--index", default="IVF256,Flat")
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64,128,256")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--duration", type=float, default=8)
    args = ap.parse_args()
    c.ensure_built()
    work = tempfile.mkdtemp(prefix="bench-vec-", dir=c.OUT)
    rows = []
    try:
        with c.Sim(extra=["--vector-data", args.data, "--vector-index", args.index],
                   start_s=300) as sim:
            truth = None
            for n in [int(x) for x in args.nprobe.split(",")]:
                row, saved = step(sim, work, n, args, truth)
                truth = truth or saved
                rows.append(row)
                c.log("nprobe %4d: recall@10 %.3f (p5 %.2f), %7.0f q/s, p50 %.2f ms, p99 %.2f ms, "
                      "client %.0f us/query" % (n, row["recall_mean"], row["recall_p5"],
                                                row["qps"], row["p50_ms"], row["p99_ms"],
                                                row["client_us_per_query"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    k = knee([(r["qps"], r["recall_mean"]) for r in rows])
    print("\n| nprobe | recall@10 | recall p5 | QPS | p50 ms | p99 ms | client us/query |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for i, r in enumerate(rows):
        print("| %d%s | %.3f | %.2f | %.0f | %.2f | %.2f | %.0f |" % (
            r["nprobe"], " (knee)" if i == k else "", r["recall_mean"], r["recall_p5"], r["qps"],
            r["p50_ms"], r["p99_ms"], r["client_us_per_query"]))
    c.write_result("vector_nprobe", {"data": args.data, "index": args.index,
                                     "concurrency": args.concurrency, "steps": rows,
                                     "knee_nprobe": rows[k]["nprobe"] if k is not None else None})


if __name__ == "__main__":
    main()
