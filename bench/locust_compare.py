#!/usr/bin/env python3
"""locust_compare: tokenstorm, Locust and a raw byte-scanning client side by side.

The same streaming chat workload (N users in a closed loop, each request
max_tokens=L with ignore_eos, a new one as soon as one ends; the engine
paced so that N streams get --rate events/s in all) is driven by Locust
(Debian's python3-locust, headless, one process, bench/locustfile.py), by
Locust again with the user also json.loads-ing each event, by
bench/out/sseload (epoll, raw HTTP/1.1, counts "data:" lines without
parsing: the cost of the bytes themselves) and by `tokenstorm run --workers
1` (every event decoded), each pinned to core 1, each against a fresh
simulator on core 0 with the same settings. Over the same steady window of
each run it measures SSE events (at the simulator: tokens + 4 per finished
request, + 3 for sseload, which does not ask for usage) and the client's
CPU time (its threads' run time from the scheduler, common.proc_cpu_s), and
reports events per client CPU-second and the ratios. --baseline DIR adds a
run of DIR/tokenstorm (an older build) beside the current one. With
--step-ms 0 the engine outruns every client and the figures are each
client's ceiling on one core instead. With --repeat N every client runs N
times in rounds at each user count, and the medians of the rounds' ratios
are printed with their range: one client's figure moves by up to 10%
between runs on this VM (sseload 433,000-480,000 events per CPU-second at
100 users on one day), more than the margins being checked.
Usage: locust_compare.py [--users 100,1000] [--length 500] [--duration 15]
                         [--rate 20000 | --step-ms MS] [--baseline BUILD_DIR]
                         [--repeat N]
"""

import argparse
import json
import os
import shutil
import statistics
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


def run_sseload(users, length, duration, window):
    c.wait_quiet()
    with c.Sim(sets=SETS) as sim:
        argv = c.pinned(c.CLIENT_CORE, [
            c.SSELOAD, "--port", str(sim.port), "--streams", str(users), "--warmup", "0",
            "--duration", str(duration), "--max-tokens", str(length), "--ramp-timeout", "30"])
        r = c.sampled_run(argv, sim, window, duration + 60, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    # sampled_run counts 4 events per finished request; sseload gets 3 (no usage chunk)
    win = [x for x in r["samples"] if window[0] <= x["t"] <= window[1]]
    if "events" in r and len(win) >= 2:
        r["events"] -= win[-1]["finished"] - win[0]["finished"]
        r["events_per_s"] = round(r["events"] / r["win_s"])
    return r


def run_tokenstorm(users, length, duration, window, binary=None):
    work = tempfile.mkdtemp(prefix="bench-ts-", dir=c.OUT)
    c.wait_quiet()
    try:
        with c.Sim(sets=SETS) as sim:
            argv = c.pinned(c.CLIENT_CORE, [
                binary or c.TOKENSTORM, "run", "--target", sim.url, "--workers", "1",
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


def ratio(x, y):
    return round(x["events_per_cpu_s"] / y["events_per_cpu_s"], 2) if (
        x and y and x["events_per_cpu_s"] and y["events_per_cpu_s"]) else None


def compare(users, a, rnd=0):
    """All clients at one number of users; returns their summaries and the ratios."""
    global SETS
    step_ms = a.step_ms if a.step_ms is not None else users / a.rate * 1e3
    SETS = c.FAST_ENGINE + (["t_w_ms=%g" % max(step_ms - 0.05, 0)] if step_ms > 0 else [])
    window = (4.0, a.duration - 1.0)
    print("locust_compare: %d users, max_tokens %d, %d s each, engine step %s%s"
          % (users, a.length, a.duration, "%g ms" % step_ms if step_ms > 0 else "unpaced",
             ", round %d of %d" % (rnd + 1, a.repeat) if a.repeat > 1 else ""))
    lo = summary("locust", run_locust(users, a.length, a.duration, window))
    lj = None
    if not a.no_json_variant:
        lj = summary("locust+json", run_locust(users, a.length, a.duration, window, True))
    raw = summary("sseload", run_sseload(users, a.length, a.duration, window))
    base = None
    if a.baseline:
        base = summary("ts-baseline", run_tokenstorm(users, a.length, a.duration, window,
                                                     os.path.join(a.baseline, "tokenstorm")))
    ts = summary("tokenstorm", run_tokenstorm(users, a.length, a.duration, window))
    ratios = {"tokenstorm_over_locust": ratio(ts, lo), "tokenstorm_over_locust_json":
              ratio(ts, lj), "tokenstorm_over_sseload": ratio(ts, raw),
              "tokenstorm_over_baseline": ratio(ts, base)}
    print("locust_compare: %d users: events per client CPU-second, tokenstorm / sseload = %s "
          "(target >= 0.8), / Locust+json.loads = %s (target >= 5), / Locust = %s%s"
          % (users, ratios["tokenstorm_over_sseload"], ratios["tokenstorm_over_locust_json"],
             ratios["tokenstorm_over_locust"],
             ", / baseline = %s" % ratios["tokenstorm_over_baseline"] if base else ""))
    sys.stdout.flush()
    return {"users": users, "round": rnd, "step_ms": step_ms, "window_s": list(window),
            "sim_set": SETS,
            "locust": lo, "locust_json": lj, "sseload": raw, "tokenstorm_baseline": base,
            "tokenstorm": ts, "ratios": ratios}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", default="100,1000", help="comma-separated user counts")
    ap.add_argument("--length", type=int, default=500, help="max_tokens of each request")
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--rate", type=float, default=20000.0,
                    help="events/s the engine offers in all (sets the step: users / rate)")
    ap.add_argument("--step-ms", type=float, default=None,
                    help="engine step floor instead of --rate; 0 = unpaced")
    ap.add_argument("--baseline", metavar="BUILD_DIR",
                    help="also run BUILD_DIR/tokenstorm (e.g. a build of an older commit)")
    ap.add_argument("--no-json-variant", action="store_true",
                    help="skip the Locust run that also parses each event's JSON")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of every client at each user count (medians printed)")
    a = ap.parse_args()
    if not 1 <= a.repeat <= 20:
        ap.error("--repeat: 1 to 20")
    users = [int(u) for u in a.users.split(",") if u.strip()]
    if not users or min(users) < 1 or max(users) > 10000:
        sys.exit("locust_compare: --users wants counts from 1 to 10000")
    c.ensure_built()
    if not os.path.exists(LOCUST):
        sys.exit("locust_compare: %s not found (scripts/deps.sh bench installs python3-locust)"
                 % LOCUST)
    if a.baseline and not os.path.exists(os.path.join(a.baseline, "tokenstorm")):
        sys.exit("locust_compare: no tokenstorm in %s" % a.baseline)
    runs = [compare(u, a, rnd) for u in users for rnd in range(a.repeat)]
    medians = median_ratios(runs) if a.repeat > 1 else []
    for m in medians:
        print("locust_compare: %d users, medians of %d rounds (min-max): %s" % (
            m["users"], m["rounds"], ", ".join(
                "%s %s (%s-%s)" % (k, v[0], v[1], v[2]) for k, v in m.items()
                if isinstance(v, list))))
    c.write_result("locust", {
        "workload": {"users": users, "max_tokens": a.length, "duration_s": a.duration,
                     "rate": a.rate, "step_ms": a.step_ms, "repeat": a.repeat},
        "runs": runs,
        "median_ratios": medians,
    })


def median_ratios(runs):
    """Per user count: [median, min, max] of each ratio over the rounds."""
    out = []
    for users in sorted({r["users"] for r in runs}):
        rs = [r["ratios"] for r in runs if r["users"] == users]
        row = {"users": users, "rounds": len(rs)}
        for k in rs[0]:
            v = sorted(x[k] for x in rs if x[k] is not None)
            if v:
                row[k] = [round(statistics.median(v), 3), v[0], v[-1]]
        out.append(row)
    return out


if __name__ == "__main__":
    main()
