#!/usr/bin/env python3
"""mirror_overhead: does `proxy --mirror` to a slow target slow the primary path?

Two simulators on the simulator core: the primary (tiny profile) and a
deliberately slow mirror (--set t_fix_ms=50: every engine step 50 ms longer,
about 1 s an answer where the primary takes ~30 ms). Two proxies on the
client's core, both --upstream the primary: one plain, one with
--mirror <slow> (default --mirror-max 64, enough for every request at this
rate, so the mirror really runs: ~rate x 1 s calls in flight). The client
(`tokenstorm run`, open loop, --rate R, streamed chat, 20 output tokens)
runs through each in turn, interleaved (off, on, off, on, ...) so that drift
of a busy machine falls on both. Reports per round and overall the primary's
e2el and ttft p50/p99 as the client measured them, the ratio with / without
the mirror (of the rounds' medians, and of the best round of each), and
the spread of the rounds (the noise the ratio must be read against), plus the mirror's counters (sent, dropped, compared)
and its own latency.
Usage: mirror_overhead.py [--rate 20] [--round-s 8] [--rounds 3] [--slow-ms 50]
"""

import argparse
import json
import re
import resource
import signal
import subprocess
import tempfile
import threading
import time
import os

import common as c


class Proxy:
    """`tokenstorm proxy` pinned to core (a context manager); extra: more options."""

    def __init__(self, core, upstream, extra=()):
        self.argv = c.pinned(core, [c.TOKENSTORM, "proxy", "--upstream", upstream, "--listen",
                                    "127.0.0.1:0", "--api", "127.0.0.1:0", "--grace", "3s"]
                             + list(extra))
        self.proc, self.url, self.api, self.lines = None, None, None, []

    def __enter__(self):
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not self.api:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
            m = re.search(r"control API on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.api = m.group(1)
        if not self.url or not self.api:
            self.__exit__()
            raise RuntimeError("proxy did not start: " + "".join(self.lines))
        threading.Thread(target=lambda: [self.lines.append(x) for x in self.proc.stdout],
                         daemon=True).start()
        return self

    def metrics(self):
        return c.http_get(self.api + "/metrics")

    def __exit__(self, *exc):
        c.stop_proc(self.proc)
        return False


def load(target, rate, seconds, out):
    """One open-loop run through target; its summary."""
    argv = c.pinned(c.CLIENT_CORE, [c.TOKENSTORM, "run", "--target", target, "--model",
                                    "tokenstorm/tiny", "--rate", str(rate), "--duration",
                                    "%ds" % seconds, "--output-len", "fixed:20", "--quiet",
                                    "--json", "--out", out, "--force"])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    if r.returncode != 0:
        raise RuntimeError("run failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
    return json.loads(r.stdout)["summary"]


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


KEYS = ("p50_e2el_ms", "p99_e2el_ms", "p50_ttft_ms", "p99_ttft_ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=20)
    ap.add_argument("--round-s", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slow-ms", type=int, default=50)
    a = ap.parse_args()
    c.ensure_built()
    rounds = {"off": [], "on": []}
    tmp = tempfile.mkdtemp(prefix="ts-mirror-bench-")
    with c.Sim(sets=()) as prim, c.Sim(sets=("t_fix_ms=%d" % a.slow_ms,), name="slow") as slow, \
            Proxy(c.CLIENT_CORE, prim.url) as plain, \
            Proxy(c.CLIENT_CORE, prim.url, ["--mirror", slow.url,
                                            "--mirror-out", os.path.join(tmp, "mirror")]) as mir:
        c.wait_quiet()
        cpu0, kids0 = c.cores_busy_s(), children_cpu_s()
        load(plain.url, a.rate, 2, os.path.join(tmp, "warm"))  # connections, page cache
        t0 = time.monotonic()
        for k in range(a.rounds):
            for mode, px in (("off", plain), ("on", mir)):
                s = load(px.url, a.rate, a.round_s, os.path.join(tmp, "%s%d" % (mode, k)))
                rounds[mode].append({key: s[key] for key in KEYS + ("completed", "failed")})
                c.log("mirror_overhead: round %d %-3s e2el p50 %.1f p99 %.1f ms, ttft p50 %.1f "
                      "p99 %.1f ms (%d ok)" % (k + 1, mode, s["p50_e2el_ms"], s["p99_e2el_ms"],
                                               s["p50_ttft_ms"], s["p99_ttft_ms"], s["completed"]))
        elapsed = time.monotonic() - t0
        time.sleep(2 + a.slow_ms * 25 / 1000)  # the last mirrored answers
        m = mir.metrics()
    mirror = {k: c.counter(m, "tokenstorm_proxy_mirror_%s_total" % k)
              for k in ("sampled", "requests", "dropped", "compared", "cut")}
    with open(os.path.join(tmp, "mirror", "mirror.json")) as f:
        mj = json.load(f)
    mirror["latency_diff_mean_s"] = mj["latency_diff_s"]["mean"]
    # everything of ours was a child and has been waited for: the rest is other work
    other = max(0.0, c.cores_busy_s() - cpu0 - (children_cpu_s() - kids0))

    def vals(mode, key):
        return sorted(r[key] for r in rounds[mode])

    def median(mode, key):
        v = vals(mode, key)
        return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2

    # medians of the rounds (one disturbed round moves a mean a lot), and the
    # best round of each (the least disturbed): the ratio of both
    ratio = {key: median("on", key) / median("off", key) for key in KEYS}
    ratio_best = {key: vals("on", key)[0] / vals("off", key)[0] for key in KEYS}
    print("mirror_overhead  rate %.0f/s, %d rounds of %d s each way; mirror %d ms/step slower"
          % (a.rate, a.rounds, a.round_s, a.slow_ms))
    print("  %-12s %22s %22s %9s %9s" % ("primary (ms)", "off min/median/max", "on min/median/max",
                                       "on/off", "best/best"))
    for key in KEYS:
        print("  %-12s %22s %22s %9.2f %9.2f" % (
            key, "%.1f/%.1f/%.1f" % (vals("off", key)[0], median("off", key), vals("off", key)[-1]),
            "%.1f/%.1f/%.1f" % (vals("on", key)[0], median("on", key), vals("on", key)[-1]),
            ratio[key], ratio_best[key]))
    print("  mirror: %d sent, %d dropped, %d compared, mirror slower by %.2f s on average"
          % (mirror["requests"], mirror["dropped"], mirror["compared"],
             mirror["latency_diff_mean_s"] or 0))
    print("  other work on cores 0-1 during the run: %.1f CPU-s over %.0f s" % (other, elapsed))
    c.write_result("mirror_overhead", {"rate": a.rate, "round_s": a.round_s, "rounds": rounds,
                                       "ratio_on_off_median": ratio,
                                       "ratio_on_off_best": ratio_best,
                                       "mirror": mirror, "other_cpu_s": other,
                                       "slow_ms": a.slow_ms})


if __name__ == "__main__":
    main()
