#!/usr/bin/env python3
"""sim_published: the fitted vLLM 0.6.0 preset, live, against its published medians.

tests/unit/test_offline.c checks `vllm060-llama31-8b-a100` offline (the engine
model in virtual time) against vLLM 0.6.0's published benchmark (Llama-3.1-8B,
one A100-80GB, --num-scheduler-steps 10, ShareGPT, Poisson 4 and 8 req/s).
This runs the same preset live: `tokenstorm sim` on core 0 (its real-time
stepping, the API server's per-event send queue, its sockets) and
`tokenstorm run` on core 1, Poisson arrivals at each rate, prompts lognormal
mean 220 sigma 1.0 and outputs lognormal mean 194 sigma 1.0 (issue 22's
approximation of ShareGPT's lengths), and prints the medians of TTFT, TPOT
and E2E next to the published ones, with the steady-window throughput
(docs/METRICS.md "The steady window").
Usage: sim_published.py [--duration 60] [--rates 4,8] [--seed 1]
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile

import common as c

PROFILE = "vllm060-llama31-8b-a100"
# vLLM 0.6.0 blog benchmark (medians, ms): rate -> (TTFT, TPOT, E2E)
PUBLISHED = {4: (100.5, 14.1, 1692.0), 8: (120.4, 17.1, 2137.0)}
# the offline model of the same preset (docs/SIMULATOR.md, tests/unit/test_offline.c)
OFFLINE = {4: (95.9, 14.3, 1713.0), 8: (109.4, 16.8, 1986.0)}


def measure(rate, duration, seed):
    work = tempfile.mkdtemp(prefix="bench-pub-", dir=c.OUT)
    c.wait_quiet()
    try:
        with c.Sim(profile=PROFILE) as sim:
            busy0 = c.cores_busy_s()
            sim0 = c.proc_cpu_s(sim.pid)
            t = c.Timed(c.pinned(c.CLIENT_CORE, [
                c.TOKENSTORM, "run", "--target", sim.url, "--workers", "1",
                "--rate", "%g" % rate, "--arrival", "poisson", "--duration", "%gs" % duration,
                "--input-len", "lognormal:220,1.0", "--output-len", "lognormal:194,1.0",
                "--seed", str(seed), "--drain", "60s", "--out", work, "-q"]),
                stdout=subprocess.DEVNULL).run(timeout=duration + 120)
            busy = c.cores_busy_s() - busy0
            sim_cpu = c.proc_cpu_s(sim.pid) - sim0
        if t.returncode not in (0, 1):
            raise RuntimeError("tokenstorm run exited %d" % t.returncode)
        with open(os.path.join(work, "result.json")) as f:
            doc = json.load(f)
        s = doc["summary"]
        w = s.get("window") or {}
        return {
            "rate": rate, "duration_s": duration, "completed": s["completed"],
            "failed": s["failed"],
            "median_ttft_ms": s["median_ttft_ms"], "median_tpot_ms": s["median_tpot_ms"],
            "median_e2el_ms": s["median_e2el_ms"],
            "window_request_throughput": w.get("request_throughput"),
            "window_output_throughput": w.get("output_throughput"),
            "sent_rps": w.get("sent_rps"),
            "other_cpu_s": round(max(0.0, busy - sim_cpu - t.cpu_s), 2),
            "sim_cpu_s": round(sim_cpu, 2),
            "errors": doc.get("errors"),  # what failed requests got (e.g. context_length_exceeded)
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--rates", default="4,8")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    c.ensure_built()
    rows = []
    for rate in [int(x) for x in a.rates.split(",")]:
        r = measure(rate, a.duration, a.seed)
        pub = PUBLISHED.get(rate)
        off = OFFLINE.get(rate)
        if pub:
            r["published"] = dict(zip(("ttft_ms", "tpot_ms", "e2el_ms"), pub))
            r["offline"] = dict(zip(("ttft_ms", "tpot_ms", "e2el_ms"), off))
            r["live_over_published"] = {
                "ttft": round(r["median_ttft_ms"] / pub[0], 3),
                "tpot": round(r["median_tpot_ms"] / pub[1], 3),
                "e2el": round(r["median_e2el_ms"] / pub[2], 3),
            }
        rows.append(r)
        print("%g req/s: %d requests (%d failed), window %.2f req/s, %.0f tok/s"
              % (rate, r["completed"], r["failed"], r["window_request_throughput"] or 0,
                 r["window_output_throughput"] or 0))
        for i, (k, name) in enumerate((("median_ttft_ms", "TTFT"), ("median_tpot_ms", "TPOT"),
                                       ("median_e2el_ms", "E2E"))):
            line = "  %-5s live %8.1f ms" % (name, r[k])
            if pub:
                line += "   published %8.1f (x%.2f)   offline %8.1f" % (pub[i], r[k] / pub[i], off[i])
            print(line)
        if r["other_cpu_s"] > 0.1 * a.duration:
            c.log("sim_published: %.1f s of other work on the cores during the run; "
                  "the figures are disturbed" % r["other_cpu_s"])
    c.write_result("sim_published", {"profile": PROFILE, "runs": rows})


if __name__ == "__main__":
    main()
