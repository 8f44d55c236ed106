#!/usr/bin/env python3
"""client_capacity: what one `tokenstorm run` worker on one core can drive.

`tokenstorm run --workers 1` runs pinned to core 1 against the simulator
(tiny profile, separate process) on core 0. Four parts:

  ceiling   closed loop, never-ending streams, an engine that offers far more
            than the client can read: the most SSE events/s the client takes
            in at full CPU, and its CPU per 1,000 events.
  events    open loop, 100 streams of 1 s, rising token rate per stream: the
            schedule lag p99 (result.json latency.lag.p99) at each events/s.
  streams   open loop, 10 tokens/s per stream, 3-s streams, rising stream
            count: lag p99, in-flight streams, client memory per stream.
  hold      closed loop, 5,000 users at 10 tokens/s: can the client hold the
            streams at all (never-ending streams, and 3-s streams that reuse
            connections), with the memory per stream against a 10-user run.

SSE events are counted at the simulator: generation tokens plus 4 events per
finished request (role chunk, finish chunk, usage chunk, [DONE]); sampled
with the client's /proc CPU time over the same steady window.
Usage: client_capacity.py [--quick]
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

LAG_LIMIT_MS = 1.0


def engine(step_ms):
    """FAST_ENGINE with a step floor of step_ms (t_fix 0.05 ms + t_w)."""
    return c.FAST_ENGINE + ["t_w_ms=%g" % max(step_ms - 0.05, 0.0)]


def run_point(name, sim, args, window, timeout):
    """Runs `tokenstorm run --workers 1` pinned to the client core against sim
    and measures it over window = (t0, t1) seconds after its start."""
    out = tempfile.mkdtemp(prefix="bench-cc-", dir=c.OUT)
    argv = c.pinned(c.CLIENT_CORE, [c.TOKENSTORM, "run", "--target", sim.url, "--workers", "1",
                                    "--input-len", "fixed:10", "--out", out, "-q"] + args)
    try:
        r = c.sampled_run(argv, sim, window, timeout, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
        try:
            with open(os.path.join(out, "result.json")) as f:
                res = json.load(f)
        except (OSError, ValueError):
            raise RuntimeError("%s: tokenstorm run failed (exit %d)" % (name, r["returncode"]))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if "events" not in r:
        raise RuntimeError("%s: too few samples in the window" % name)
    lag = res["latency"].get("lag", {})
    return {
        "name": name,
        "args": args,
        "exit": r["returncode"],
        "window_s": r["win_s"],
        "events_per_s": r["events_per_s"],
        "client_cpu_util": round(r["cpu_s_win"] / r["win_s"], 3),
        "client_cpu_ms_per_1000_events": round(r["cpu_s_win"] / r["events"] * 1e6, 3)
        if r["events"] else None,
        "sim_running_mean": r["running_mean"],
        "sim_running_max": r["running_max"],
        "client_rss_kb_mid": r["rss_kb_mid"],
        "lag_p50_ms": lag.get("p50"),
        "lag_p99_ms": lag.get("p99"),
        "lag_max_ms": lag.get("max"),
        "lag_count": lag.get("count"),
        "completed": res["summary"]["completed"],
        "failed": res["summary"]["failed"],
        "client_cpu_s_total": r["cpu_s"],
        "client_maxrss_kb": r["maxrss_kb"],
        "other_cpu_s": r["other_cpu_s"],
    }


def show(p, extra=""):
    print("  %-22s events/s %7d  in flight %5d (max %5d)  client CPU %5.1f%%  "
          "%.3f ms CPU/1000 ev  lag p50 %s p99 %s ms  RSS %d KB%s"
          % (p["name"], p["events_per_s"], p["sim_running_mean"], p["sim_running_max"],
             p["client_cpu_util"] * 100, p["client_cpu_ms_per_1000_events"] or 0,
             p["lag_p50_ms"], p["lag_p99_ms"], p["client_rss_kb_mid"], extra))
    if p["other_cpu_s"] > 0.05 * p["window_s"] + 0.5:
        c.log("client_capacity: warning: other processes used about %.1f CPU-s on the cores "
              "during %s" % (p["other_cpu_s"], p["name"]))
    sys.stdout.flush()


def fresh_sim(step_ms):
    c.wait_quiet()
    s = c.Sim(sets=engine(step_ms))
    s.__enter__()
    return s


def ceiling(users_list):
    pts = []
    for users in users_list:
        sim = fresh_sim(1.05)  # the client cannot keep up with this engine
        try:
            p = run_point("ceiling-%d-users" % users, sim,
                          ["--concurrency", str(users), "--ramp-users", "1s", "--duration", "9s",
                           "--output-len", "fixed:30000", "--drain", "0s"],
                          window=(3.0, 9.0), timeout=40)
        finally:
            sim.__exit__(None, None, None)
        show(p)
        pts.append(p)
    return pts


def open_point(name, streams, tok_per_s, stream_s, measure_s):
    """Open loop holding about `streams` streams of stream_s seconds each."""
    length = int(round(tok_per_s * stream_s))
    rate = streams / stream_s
    warm = stream_s + 1.0
    sim = fresh_sim(1000.0 / tok_per_s)
    try:
        p = run_point(name, sim,
                      ["--rate", "%g" % rate, "--arrival", "constant", "--warmup", "%gs" % warm,
                       "--duration", "%gs" % measure_s, "--output-len", "fixed:%d" % length,
                       "--drain", "%gs" % (stream_s + 10)],
                      window=(warm + 0.5, warm + measure_s), timeout=warm + measure_s + stream_s
                      + 40)
    finally:
        sim.__exit__(None, None, None)
    p.update({"target_streams": streams, "tokens_per_s_per_stream": tok_per_s,
              "stream_s": stream_s, "rate": rate})
    return p


def hold_points():
    """Closed loop, 10 and 5,000 users at 10 tokens/s; memory per stream from the difference."""
    print("client_capacity: holding 5,000 streams (closed loop, 10 tokens/s per stream)")
    hold = []
    for name, users, length in (("hold-10-users", 10, "fixed:30000"),
                                ("hold-5000-users", 5000, "fixed:30000"),
                                ("hold-5000-users-3s", 5000, "fixed:30")):
        sim = fresh_sim(100.0)
        try:
            p = run_point(name, sim,
                          ["--concurrency", str(users), "--ramp-users", "3s", "--duration", "10s",
                           "--output-len", length, "--drain", "0s"],
                          window=(5.0, 10.0), timeout=60)
        finally:
            sim.__exit__(None, None, None)
        show(p)
        hold.append(p)
    base = hold[0]["client_rss_kb_mid"]
    for p in hold[1:]:
        p["client_kb_per_stream"] = round((p["client_rss_kb_mid"] - base)
                                          / max(p["sim_running_mean"] - 10, 1), 2)
    return hold


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer points")
    ap.add_argument("--hold-only", action="store_true",
                    help="only the 5,000-stream hold (memory per stream)")
    a = ap.parse_args()
    c.ensure_built()
    if a.hold_only:
        hold = hold_points()
        print("client_capacity: %.2f KB per stream holding 5,000 never-ending streams, %.2f KB "
              "with 3-s streams" % (hold[1]["client_kb_per_stream"], hold[2]["client_kb_per_stream"]))
        c.write_result("client_capacity_hold", {"hold": hold})
        return
    t0 = time.monotonic()
    res = {"sim": {"profile": "tiny", "set": c.FAST_ENGINE + ["t_w_ms=<step floor>"],
                   "core": c.SIM_CORE},
           "client": {"command": "tokenstorm run --workers 1", "core": c.CLIENT_CORE},
           "lag_limit_ms": LAG_LIMIT_MS}

    print("client_capacity: ceiling (closed loop, engine faster than the client)")
    res["ceiling"] = ceiling([100] if a.quick else [100, 1000])

    print("client_capacity: events/s sweep (open loop, 100 streams of 1 s)")
    rates = [100, 500] if a.quick else [50, 100, 200, 500]
    ev = []
    for r in rates:
        p = open_point("events-%dtok/s/stream" % r, 100, r, 1.0, 6.0)
        show(p)
        ev.append(p)
    res["events_sweep"] = ev

    print("client_capacity: streams sweep (open loop, 10 tokens/s per stream, 3-s streams)")
    counts = [1000, 4000] if a.quick else [100, 1000, 2000, 4000]
    st = []
    for n in counts:
        p = open_point("streams-%d" % n, n, 10, 3.0, 6.0)
        show(p)
        st.append(p)
    res["streams_sweep"] = st

    hold = hold_points()
    base = hold[0]["client_rss_kb_mid"]
    for p in st:
        p["client_kb_per_stream"] = round((p["client_rss_kb_mid"] - base)
                                          / max(p["sim_running_mean"] - 10, 1), 2)
    res["hold"] = hold

    ok_ev = [p for p in ev if p["lag_p99_ms"] is not None and p["lag_p99_ms"] < LAG_LIMIT_MS]
    ok_st = [p for p in st if p["lag_p99_ms"] is not None and p["lag_p99_ms"] < LAG_LIMIT_MS]
    res["summary"] = {
        "max_events_per_s_at_full_cpu": max(p["events_per_s"] for p in res["ceiling"]),
        "client_cpu_ms_per_1000_events_at_ceiling": res["ceiling"][0][
            "client_cpu_ms_per_1000_events"],
        "max_events_per_s_lag_p99_under_1ms": max((p["events_per_s"] for p in ok_ev),
                                                  default=None),
        "max_streams_lag_p99_under_1ms": max((p["sim_running_mean"] for p in ok_st),
                                             default=None),
        "streams_held_5000_never_ending": hold[1]["sim_running_mean"],
        "streams_held_5000_reusing_connections": hold[2]["sim_running_mean"],
        "client_kb_per_stream_5000": hold[1]["client_kb_per_stream"],
        "seconds": round(time.monotonic() - t0),
    }
    s = res["summary"]
    print("client_capacity summary: ceiling %d events/s (%.3f ms CPU/1000 events); "
          "lag p99 < 1 ms up to %s events/s and %s streams; 5,000 users: %d streams held "
          "(never-ending), %d (3-s streams, reused connections); %.2f KB per stream"
          % (s["max_events_per_s_at_full_cpu"], s["client_cpu_ms_per_1000_events_at_ceiling"],
             s["max_events_per_s_lag_p99_under_1ms"], s["max_streams_lag_p99_under_1ms"],
             s["streams_held_5000_never_ending"], s["streams_held_5000_reusing_connections"],
             s["client_kb_per_stream_5000"]))
    c.write_result("client_capacity", res)


if __name__ == "__main__":
    main()
