#!/usr/bin/env python3
"""locust_compare: tokenstorm and Locust side by side on one workload.

The same streaming chat workload (N users in a closed loop, each request
max_tokens=L with ignore_eos and include_usage, a new one as soon as one
ends) is driven first by Locust (Debian's python3-locust, headless, one
process, bench/locustfile.py) and then by `tokenstorm run --workers 1`, each
pinned to core 1, each against a fresh simulator on core 0 with the same
settings. Over the same steady window of each run it measures SSE events
(at the simulator: tokens + 4 per finished request) and the client's CPU time
(/proc/PID/stat), and reports events per client CPU-second and the ratio.
With --step-ms 0 the engine outruns both clients and the figures are each
client's ceiling on one core instead.
Usage: locust_compare.py [--users 100] [--length 500] [--duration 15] [--step-ms 5]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import common as c

LOCUST = os.environ.get("LOCUST", "/usr/bin/locust")
SETS = c.FAST_ENGINE  # + t_w_ms from --step-ms


def run_locust(users, length, duration, window, parse_json=False):
    work = tempfile.mkdtemp(prefix="bench-locust-", dir=c.OUT)
    counts = os.path.join(work, "counts.json")
    env = dict(os.environ, BENCH_MAX_TOKENS=str(length), BENCH_EVENTS_OUT=counts,
               BENCH_PARSE_JSON="1" if parse_json else "0", PYTHONDONTWRITEBYTECODE="1")
    c.wait_quiet()
    try:
        with c.Sim(sets=SETS) as sim:
            argv = c.pinned(c.CLIENT_CORE, [
                LOCUST, "-f", os.path.join(c.ROOT, "bench", "locustfile.py"), "--headless",
                "--host", sim.url, "-u", str(users), "-r", str(users), "-t", "%ds" % duration,
                "--stop-timeout", "5", "--only-summary", "--loglevel", "WARNING"])
            r = c.sampled_run(argv, sim, window, duration + 60, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        own = None
        if os.path.exists(counts):
            with open(counts) as f:
                own = json.load(f)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r["client_counted"] = own
    return r


def run_tokenstorm(users, length, duration, window):
    work = tempfile.mkdtemp(prefix="bench-ts-", dir=c.OUT)
    c.wait_quiet()
    try:
        with c.Sim(sets=SETS) as sim:
            argv = c.pinned(c.CLIENT_CORE, [
                c.TOKENSTORM, "run", "--target", sim.url, "--workers", "1",
                "--concurrency", str(users), "--duration", "%ds" % duration,
                "--output-len", "fixed:%d" % length, "--input-len", "fixed:1",
                "--drain", "5s", "--out", work, "-q"])
            r = c.sampled_run(argv, sim, window, duration + 60, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        with open(os.path.join(work, "result.json")) as f:
            res = json.load(f)
        r["client_counted"] = {"requests": res["summary"]["completed"],
                               "choice_chunks": res["tokens"]["choice_chunks"]}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return r


def summary(name, r):
    eff = r["events"] / r["cpu_s_win"] if r.get("cpu_s_win") else None
    out = {"client": name, "events_per_s": r.get("events_per_s"),
           "client_cpu_util": round(r["cpu_s_win"] / r["win_s"], 3) if r.get("win_s") else None,
           "events_per_cpu_s": round(eff) if eff else None,
           "streams_mean": r.get("running_mean"), "window_s": r.get("win_s"),
           "client_cpu_s_total": r["cpu_s"], "client_maxrss_kb": r["maxrss_kb"],
           "client_counted": r.get("client_counted"), "exit": r["returncode"],
           "other_cpu_s": r["other_cpu_s"]}
    print("  %-11s events/s %7s  streams %4s  client CPU %5.1f%%  events per CPU-second %s"
          % (name, out["events_per_s"], out["streams_mean"], (out["client_cpu_util"] or 0) * 100,
             out["events_per_cpu_s"]))
    sys.stdout.flush()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=100)
    ap.add_argument("--length", type=int, default=500, help="max_tokens of each request")
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--step-ms", type=float, default=5.0,
                    help="engine step floor: 100 users at 5 ms = 20,000 events/s; 0 = unpaced")
    ap.add_argument("--no-json-variant", action="store_true",
                    help="skip the Locust run that also parses each event's JSON")
    a = ap.parse_args()
    global SETS
    if a.step_ms > 0:
        SETS = c.FAST_ENGINE + ["t_w_ms=%g" % max(a.step_ms - 0.05, 0)]
    c.ensure_built()
    if not os.path.exists(LOCUST):
        sys.exit("locust_compare: %s not found (scripts/deps.sh bench installs python3-locust)"
                 % LOCUST)
    window = (4.0, a.duration - 1.0)
    print("locust_compare: %d users, max_tokens %d, %d s each, engine step %s"
          % (a.users, a.length, a.duration, "%g ms" % a.step_ms if a.step_ms > 0 else "unpaced"))
    lo = summary("locust", run_locust(a.users, a.length, a.duration, window))
    lj = None
    if not a.no_json_variant:
        lj = summary("locust+json", run_locust(a.users, a.length, a.duration, window, True))
    ts = summary("tokenstorm", run_tokenstorm(a.users, a.length, a.duration, window))

    def ratio(x, y):
        return round(x["events_per_cpu_s"] / y["events_per_cpu_s"], 2) if (
            x and y and x["events_per_cpu_s"] and y["events_per_cpu_s"]) else None

    r, rj = ratio(ts, lo), ratio(ts, lj)
    print("locust_compare: events per client CPU-second, tokenstorm / Locust = %s "
          "(Locust counting lines only)%s" % (r, "; %s against Locust parsing each event's JSON"
                                               % rj if lj else ""))
    c.write_result("locust", {
        "workload": {"users": a.users, "max_tokens": a.length, "duration_s": a.duration,
                     "step_ms": a.step_ms,
                     "window_s": list(window), "sim_set": SETS},
        "locust": lo, "locust_json": lj, "tokenstorm": ts,
        "ratio_events_per_cpu_s": r,
        "ratio_events_per_cpu_s_vs_locust_json": rj,
    })


if __name__ == "__main__":
    main()
