#!/usr/bin/env python3
"""proxy_overhead: the latency `tokenstorm proxy` adds per SSE event, no fault.

The simulator (tiny profile, engine step 50 ms, so 20 tokens/s per stream,
100 tokens per response) runs on core 0 with --trace-log (token_ns[i]: the
CLOCK_MONOTONIC time token i was written to the socket). bench/out/sseload
on core 1 holds 1,000 concurrent streams and, with --record, writes the
CLOCK_MONOTONIC time it read each event of each response with the
X-Request-Id it sent. Joining the two by request id gives, per token event,

  latency = client receive time - simulator write time

measured once with the client connected to the simulator directly and once
through `tokenstorm proxy --upstream <sim>` (no fault), pinned to
--proxy-core (default 1,0: one run with the proxy on the client's core, one
on the simulator's; 3 processes on 2 cores) with --proxy-threads loops.
Reports p50/p99/p99.9/max of both and the differences of the quantiles (the
proxy's added latency per event; the runs are separate, so the difference is
of the distributions, not paired per event). Target (issue 5): p99 added <=
100 us. Also reports the proxy's own view for the window, from its /metrics
(tokenstorm_proxy_forward_delay_seconds: kernel receive time of the upstream
bytes to their write to the client; bucket upper bounds).
Usage: proxy_overhead.py [--streams 1000,100] [--duration 15] [--proxy-core 1,0]
                         [--proxy-threads N[,N...]] (one per --proxy-core entry)
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import common as c

TOKENS_PER_S = 20
LENGTH = 100
TARGET_US = 100


class Proxy:
    """`tokenstorm proxy --upstream URL --no-api` pinned to core (a context manager)."""

    def __init__(self, core, upstream, threads=1):
        self.argv = c.pinned(core, [c.TOKENSTORM, "proxy", "--upstream", upstream, "--listen",
                                    "127.0.0.1:0", "--api", "127.0.0.1:0", "--grace", "1s",
                                    "--threads", str(threads)])
        self.proc, self.port, self.api, self.lines = None, None, None, []

    def __enter__(self):
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            m = re.search(r"control API on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.api = m.group(1)
                break
        if not self.port or not self.api:
            self.__exit__()
            raise RuntimeError("proxy did not start: " + "".join(self.lines))
        threading.Thread(target=lambda: [self.lines.append(x) for x in self.proc.stdout],
                         daemon=True).start()
        return self

    def forward_delay(self):
        """The proxy's tokenstorm_proxy_forward_delay_seconds buckets: {le: count}."""
        with urllib.request.urlopen(self.api + "/metrics", timeout=5) as r:
            text = r.read().decode()
        out = {}
        for m in re.finditer(r'^tokenstorm_proxy_forward_delay_seconds_bucket\{le="([^"]+)"\} '
                             r'(\d+)$', text, re.M):
            out[float(m.group(1))] = int(m.group(2))
        return out

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return False


def bucket_quantiles(before, after):
    """Upper bounds (us) of the buckets holding p50/p99 of the window's
    forward delays (cumulative Prometheus buckets, after - before)."""
    les = sorted(after)
    cum = [after[le] - before.get(le, 0) for le in les]
    n = cum[-1] if cum else 0
    out = {"count": n}
    for q in (0.5, 0.99, 0.999):
        le = next((le for le, k in zip(les, cum) if k >= q * n), None) if n else None
        out["p%g_le" % (q * 100)] = None if le is None else (
            "inf" if le == float("inf") else round(le * 1e6, 1))
    return out


def quantiles(xs):
    xs = sorted(xs)
    out = {}
    for q in (0.5, 0.9, 0.99, 0.999):
        i = min(len(xs) - 1, max(0, int(round(q * len(xs) + 0.5)) - 1))
        out["p%g" % (q * 100)] = round(xs[i], 1) if xs else None
    out["max"] = round(xs[-1], 1) if xs else None
    out["mean"] = round(sum(xs) / len(xs), 1) if xs else None
    out["count"] = len(xs)
    return out


def run(streams, duration, proxy_core, work, threads=1):
    """One measurement: proxy_core None = direct. Returns per-event latency
    quantiles in microseconds and the CPU figures."""
    trace = os.path.join(work, "trace.jsonl")
    rec = os.path.join(work, "recv.jsonl")
    sets = c.FAST_ENGINE + ["t_w_ms=%g" % (1000.0 / TOKENS_PER_S - 0.05)]
    c.wait_quiet()
    with c.Sim(sets=sets, extra=["--trace-log", trace]) as sim:
        px = Proxy(proxy_core, sim.url, threads).__enter__() if proxy_core is not None else None
        try:
            port = px.port if px else sim.port
            warmup = LENGTH / TOKENS_PER_S + 1
            argv = c.pinned(c.CLIENT_CORE, [
                c.SSELOAD, "--port", str(port), "--streams", str(streams), "--warmup",
                str(warmup), "--duration", str(duration), "--max-tokens", str(LENGTH),
                "--watch-pid", str(sim.pid), "--ramp-timeout", "40", "--record", rec])
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
            timer = threading.Timer(warmup + duration + 90, p.kill)
            timer.start()
            res, edge = None, {}
            try:
                for line in p.stdout:
                    line = line.strip()
                    if line in ("window-start", "window-end"):
                        edge[line] = (c.cores_busy_s(),
                                      c.proc_cpu_s(px.proc.pid) if px else 0.0,
                                      px.forward_delay() if px else {})
                    elif line.startswith("{"):
                        res = json.loads(line)
                p.wait()
            finally:
                timer.cancel()
        finally:
            if px:
                px.__exit__()
    if res is None or "window-end" not in edge:
        raise RuntimeError("sseload failed (exit %s)" % p.returncode)
    busy = edge["window-end"][0] - edge["window-start"][0]
    proxy_cpu = edge["window-end"][1] - edge["window-start"][1]
    truth = {}
    with open(trace) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("status") == "finished" and r.get("token_ns"):
                truth[r["request_id"]] = r["token_ns"]
    lat, joined, unmatched, bad = [], 0, 0, 0
    with open(rec) as f:
        for line in f:
            r = json.loads(line)
            tok = truth.get(r["request_id"])
            if tok is None:
                unmatched += 1
                continue
            recv = r["recv_ns"]
            # events: role chunk, one per token, finish chunk, [DONE]
            if len(recv) != len(tok) + 3:
                bad += 1
                continue
            joined += 1
            lat.extend((recv[i + 1] - t) / 1e3 for i, t in enumerate(tok))
    ev = res["events"] or 1
    us = lambda cpu: round(cpu / ev * 1e6, 2) if cpu is not None else None
    return {
        "streams": streams,
        "via": ("proxy (core %s%s)" % (proxy_core, ", %d thr" % threads if threads > 1 else "")
                if px else "direct"),
        "proxy_core": proxy_core,
        "proxy_threads": threads if px else None,
        "latency_us": quantiles(lat),
        "responses_joined": joined, "responses_unmatched": unmatched,
        "responses_bad_event_count": bad,
        "events_per_s": round(res["events_per_s"]), "errors": res["errors"],
        "window_s": res["window_s"],
        "sim_cpu_s": res.get("server_cpu_s"), "client_cpu_s": res["client_cpu_s"],
        "proxy_cpu_s": round(proxy_cpu, 2) if px else None,
        # the proxy's own view: kernel receive time of the upstream bytes -> write to the client
        "proxy_forward_delay_us": (bucket_quantiles(edge["window-start"][2], edge["window-end"][2])
                                   if px else None),
        "cpu_us_per_event": {"sim": us(res.get("server_cpu_s")), "client": us(res["client_cpu_s"]),
                             "proxy": us(proxy_cpu) if px else None},
        "other_cpu_s": round(busy - res.get("server_cpu_s", 0) - res["client_cpu_s"]
                             - proxy_cpu, 2),
    }


def show(m):
    l = m["latency_us"]
    print("  %5d streams %-16s events/s %6d  latency us: p50 %7.1f p90 %7.1f p99 %7.1f p99.9 %7.1f max %8.1f"
          "  (%d events, %d responses)  CPU s: sim %.2f proxy %s client %.2f other %.2f"
          % (m["streams"], m["via"], m["events_per_s"], l["p50"], l["p90"], l["p99"], l["p99.9"], l["max"],
             l["count"], m["responses_joined"], m["sim_cpu_s"] or 0,
             "%.2f" % m["proxy_cpu_s"] if m["proxy_cpu_s"] is not None else "-",
             m["client_cpu_s"], m["other_cpu_s"]))
    if m["proxy_forward_delay_us"]:
        f = m["proxy_forward_delay_us"]
        print("  %5s the proxy's own forward delay (its /metrics, %d pieces): p50 <= %s us, "
              "p99 <= %s us, p99.9 <= %s us" % ("", f["count"], f["p50_le"], f["p99_le"],
                                                 f["p99.9_le"]))
    if m["other_cpu_s"] > 0.05 * m["window_s"] + 0.5:
        c.log("proxy_overhead: warning: other processes used about %.1f CPU-s on the cores"
              % m["other_cpu_s"])
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", default="1000,100",
                    help="concurrent streams, comma-separated: one set of runs each")
    ap.add_argument("--duration", type=float, default=15)
    ap.add_argument("--proxy-core", default="%s,%s" % (c.CLIENT_CORE, c.SIM_CORE),
                    help="core(s) for the proxy, comma-separated: one proxy run each "
                         "(a taskset list such as 0-1 gives one run several cores)")
    ap.add_argument("--proxy-threads", default="1",
                    help="tokenstorm proxy --threads N (its loop threads): one value for every "
                         "proxy run, or one per --proxy-core entry")
    ap.add_argument("--keep", metavar="DIR", help="keep the trace and receive logs in DIR")
    a = ap.parse_args()
    c.ensure_built()
    c.log("proxy_overhead: %s streams at %d tokens/s each, %d tokens per response; sim core %s,"
          " client core %s" % (a.streams, TOKENS_PER_S, LENGTH, c.SIM_CORE, c.CLIENT_CORE))
    cores = a.proxy_core.split(",")
    threads = [int(x) for x in a.proxy_threads.split(",")]
    if len(threads) == 1:
        threads = threads * len(cores)
    if len(threads) != len(cores) or min(threads) < 1:
        ap.error("--proxy-threads: one value, or one per --proxy-core entry")
    points = []
    for streams in [int(x) for x in a.streams.split(",")]:
        runs = []
        for core, nthr in [(None, 1)] + list(zip(cores, threads)):
            work = tempfile.mkdtemp(prefix="bench-po-", dir=c.OUT)
            try:
                m = run(streams, a.duration, core, work, nthr)
            finally:
                if a.keep:
                    dst = os.path.join(a.keep, "%d-%s" % (streams, "direct" if core is None
                                                          else "proxy-core%s-t%d" % (core, nthr)))
                    shutil.rmtree(dst, ignore_errors=True)
                    shutil.copytree(work, dst)
                shutil.rmtree(work, ignore_errors=True)
            show(m)
            runs.append(m)
        d = runs[0]["latency_us"]
        added = []
        for m in runs[1:]:
            l = m["latency_us"]
            x = {k: round(l[k] - d[k], 1) for k in ("p50", "p90", "p99", "p99.9", "mean")}
            x["proxy_core"] = m["proxy_core"]
            x["proxy_threads"] = m["proxy_threads"]
            x["target_p99_us"] = TARGET_US
            # other work on the cores in either run spoils the comparison
            x["other_cpu_s"] = max(runs[0]["other_cpu_s"], m["other_cpu_s"])
            noisy = x["other_cpu_s"] > 0.05 * a.duration + 0.5
            x["verdict"] = ("not met" if x["p50"] > TARGET_US or (x["p99"] > TARGET_US
                                                                 and not noisy)
                            else "inconclusive (other load)" if noisy or x["p99"] < 0
                            else "met")
            added.append(x)
            print("proxy_overhead  %d streams, proxy on core %s (%d thread%s) adds per event: "
                  "p50 %+.1f us, p99 %+.1f us (target p99 <= %d us: %s; other load %.1f CPU-s)"
                  % (streams, x["proxy_core"], x["proxy_threads"],
                     "" if x["proxy_threads"] == 1 else "s", x["p50"], x["p99"], TARGET_US,
                     x["verdict"], x["other_cpu_s"]))
        points.append({"streams": streams, "runs": runs, "added_us": added})
    c.write_result("proxy_overhead", {
        "sim": {"profile": "tiny", "set": c.FAST_ENGINE + ["t_w_ms=%g" % (1000 / TOKENS_PER_S
                                                                           - 0.05)],
                "core": c.SIM_CORE, "tokens_per_s_per_stream": TOKENS_PER_S,
                "output_tokens": LENGTH},
        "client": {"command": "bench/out/sseload --streams N --record FILE",
                   "core": c.CLIENT_CORE},
        "proxy": {"command": "tokenstorm proxy --upstream <sim> --no-api --threads N",
                  "cores": cores, "threads": threads},
        "points": points,
    })


if __name__ == "__main__":
    main()
