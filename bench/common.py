"""Helpers shared by the benchmarks: start the simulator pinned to a core,
scrape its /metrics, read /proc, build and run the C client, write results.

Loopback only; every wait is bounded. Python 3.9+, standard library only.
"""

import json
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
TOKENSTORM = os.path.join(BUILD, "tokenstorm")
OUT = os.path.join(ROOT, "bench", "out")
SSELOAD = os.path.join(OUT, "sseload")
RELAYFLOOR = os.path.join(OUT, "relayfloor")
SIM_CORE = os.environ.get("BENCH_SIM_CORE", "0")
CLIENT_CORE = os.environ.get("BENCH_CLIENT_CORE", "1")
CLK_TCK = os.sysconf("SC_CLK_TCK")

# A tiny-latency engine that offers far more tokens/s than one core can send:
# step = t_fix + t_w + b * batch = 1.05 ms + 0.002 ms per stream, no KV cost,
# a KV cache that never fills, room for 16k streams in one batch.
FAST_ENGINE = [
    "b_ms_per_token=0.002",
    "k_kv_ms_per_token=0",
    "kv_capacity_tokens=2000000000",
    "max_num_seqs=16384",
    "max_num_batched_tokens=65536",
]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def ensure_built():
    """Builds tokenstorm (ninja) and bench/out/sseload (cc) when missing or stale."""
    os.makedirs(OUT, exist_ok=True)
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        subprocess.run(["meson", "setup", BUILD], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", BUILD, "tokenstorm"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    src = os.path.join(ROOT, "bench", "sseload.c")
    lib = os.path.join(BUILD, "src", "base", "libts_base.a")
    subprocess.run(["ninja", "-C", BUILD, os.path.relpath(lib, BUILD)], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    if (not os.path.exists(SSELOAD) or os.path.getmtime(SSELOAD) < os.path.getmtime(src)
            or os.path.getmtime(SSELOAD) < os.path.getmtime(lib)):
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-g", "-std=gnu11", "-Wall", "-Wextra",
                        "-Werror", "-Wshadow", "-Wvla", "-D_GNU_SOURCE",
                        "-I" + os.path.join(ROOT, "src"), src, lib, "-o", SSELOAD]
                       # --recv uring where liburing is (a dependency of the proxy's sends)
                       + (["-luring"] if os.path.exists("/usr/include/liburing.h") else []),
                       check=True)
    src = os.path.join(ROOT, "bench", "relayfloor.c")
    if not os.path.exists(RELAYFLOOR) or os.path.getmtime(RELAYFLOOR) < os.path.getmtime(src):
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-g", "-std=gnu11", "-Wall", "-Wextra",
                        "-Werror", "-Wshadow", "-Wvla", "-D_GNU_SOURCE", src, "-o", RELAYFLOOR]
                       + (["-luring"] if os.path.exists("/usr/include/liburing.h") else []),
                       check=True)


# On a shared machine, run the measured processes at the highest nice
# priority (root only) so that other work on the cores disturbs them less.
NICE = os.environ.get("BENCH_NICE", "-20" if os.geteuid() == 0 else "0")


def pinned(core, argv):
    """argv pinned to one core (and at priority NICE): nice and taskset exec
    the program, so the pid is the program's."""
    pre = ["nice", "-n", NICE] if NICE not in ("", "0") else []
    return pre + ["taskset", "-c", str(core)] + argv


class Sim:
    """The simulator as a separate process pinned to SIM_CORE (a context manager)."""

    def __init__(self, profile="tiny", sets=(), extra=(), name="sim", start_s=10):
        self.argv = pinned(SIM_CORE, [TOKENSTORM, "sim", "--profile", profile,
                                      "--listen", "127.0.0.1:0", "--grace", "1s"]
                           + [x for s in sets for x in ("--set", s)] + list(extra))
        self.name = name
        self.start_s = start_s  # a simulator that builds a vector index needs longer
        self.proc = None
        self.port = None
        self.lines = []

    def __enter__(self):
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        deadline = time.monotonic() + self.start_s
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            self.__exit__(None, None, None)
            raise RuntimeError("simulator did not start: " + "".join(self.lines))
        # keep draining its output so it never blocks on a full pipe
        threading.Thread(target=self._drain, daemon=True).start()
        return self

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def pid(self):
        return self.proc.pid  # taskset execs the simulator: same pid

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def __exit__(self, *exc):
        stop_proc(self.proc)
        return False


def stop_proc(proc, sig=signal.SIGTERM):
    """Ends a child still running: sig, 15 s to go, then SIGKILL."""
    if proc and proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def metrics(port):
    return http_get("http://127.0.0.1:%d/metrics" % port)


def histogram(text, name):
    """[(le, cumulative count)] of a Prometheus histogram, +Inf as float('inf')."""
    out = []
    for m in re.finditer(r'^%s_bucket\{[^}]*le="([^"]+)"\} (\S+)$' % re.escape(name), text,
                         re.M):
        le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
        out.append((le, float(m.group(2))))
    return sorted(out)


def counter(text, name):
    total = 0.0
    for m in re.finditer(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name), text, re.M):
        total += float(m.group(1))
    return total


def hist_delta(a, b):
    return [(le, cb - ca) for (le, ca), (_, cb) in zip(a, b)]


def hist_quantile(buckets, q):
    """Quantile q of cumulative buckets, interpolated linearly inside its bucket.
    Returns (value, bucket_lo, bucket_hi, count); value is None with no data."""
    total = buckets[-1][1] if buckets else 0
    if total <= 0:
        return None, None, None, 0
    rank = q * total
    lo, prev = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return lo, lo, le, total  # past the last finite bound: report that bound
            frac = (rank - prev) / (c - prev) if c > prev else 1.0
            return lo + (le - lo) * frac, lo, le, total
        lo, prev = le, c
    return None, None, None, total


def cores_busy_s(cores=(0, 1)):
    """Busy (non-idle, non-iowait) CPU seconds of the given cores, from /proc/stat."""
    total = 0
    with open("/proc/stat") as f:
        for line in f:
            parts = line.split()
            if parts[0].startswith("cpu") and parts[0][3:].isdigit() and int(parts[0][3:]) in cores:
                v = [int(x) for x in parts[1:]]
                total += sum(v[:8]) - v[3] - v[4]
    return total / CLK_TCK


def proc_cpu_s(pid):
    """CPU time of pid's live threads in seconds: the scheduler's own count in
    nanoseconds (/proc/PID/task/TID/schedstat), where /proc/PID/stat's
    utime + stime come in 10-ms ticks (a relay that uses 0.14 s of CPU in a
    window would be measured to +-7%). Falls back to /proc/PID/stat where
    schedstat is missing or reads 0 (a kernel without scheduler info)."""
    total = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # the thread ended meanwhile
    except OSError:
        total = 0
    if total > 0:
        return total / 1e9
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def run_sseload(sim, streams, warmup=3, duration=15, max_tokens=30000, ramp_timeout=40):
    """Runs bench/out/sseload pinned to CLIENT_CORE against sim with `streams`
    streams; scrapes the simulator's /metrics at the window's edges. Returns
    the client's JSON with the scrapes under "metrics_start"/"metrics_end"."""
    argv = pinned(CLIENT_CORE, [SSELOAD, "--port", str(sim.port), "--streams", str(streams),
                                "--warmup", str(warmup), "--duration", str(duration),
                                "--max-tokens", str(max_tokens), "--watch-pid", str(sim.pid),
                                "--ramp-timeout", str(ramp_timeout)])
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    res, scrapes = None, {}
    timer = threading.Timer(warmup + duration + ramp_timeout + 30, p.kill)
    timer.start()
    try:
        for line in p.stdout:
            line = line.strip()
            if line in ("window-start", "window-end"):
                scrapes[line + "-busy"] = cores_busy_s()
                scrapes[line] = metrics(sim.port)
            elif line.startswith("{"):
                res = json.loads(line)
        p.wait()
    finally:
        timer.cancel()
    if res is None:
        raise RuntimeError("sseload failed (exit %s)" % p.returncode)
    res["metrics_start"] = scrapes.get("window-start", "")
    res["metrics_end"] = scrapes.get("window-end", "")
    # CPU that neither process used on the two cores: other work on the machine
    res["other_cpu_s"] = round(scrapes.get("window-end-busy", 0) - scrapes.get(
        "window-start-busy", 0) - res.get("server_cpu_s", 0) - res.get("client_cpu_s", 0), 2)
    return res


class Timed:
    """A process's CPU time and peak RSS (from wait4), and VmRSS samples."""

    def __init__(self, argv, sample_at=None, **kw):
        self.argv = argv
        self.sample_at = sample_at
        self.kw = kw
        self.rss_samples = []

    def run(self, timeout):
        t0 = time.monotonic()
        p = subprocess.Popen(self.argv, **self.kw)
        deadline = t0 + timeout
        status, ru = None, None
        while True:
            pid, st, r = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                status, ru = st, r
                break
            now = time.monotonic()
            if now > deadline:
                p.kill()
                _, status, ru = os.wait4(p.pid, 0)
                break
            if self.sample_at and now - t0 >= self.sample_at[0]:
                try:
                    self.rss_samples.append((round(now - t0, 2), proc_rss_kb(p.pid)))
                except OSError:
                    pass
                self.sample_at = self.sample_at[1:]
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        self.returncode = p.returncode
        self.wall_s = time.monotonic() - t0
        self.cpu_s = ru.ru_utime + ru.ru_stime
        self.user_s, self.sys_s = ru.ru_utime, ru.ru_stime
        self.maxrss_kb = ru.ru_maxrss
        return self


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "loadavg_1m": os.getloadavg()[0]}


def write_result(name, obj):
    os.makedirs(OUT, exist_ok=True)
    obj = dict(obj)
    obj.setdefault("benchmark", name)
    obj.setdefault("machine", machine())
    obj.setdefault("time", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    path = os.path.join(OUT, name + ".json")
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    print("wrote %s" % os.path.relpath(path, ROOT))
    return path


EVENTS_PER_REQUEST = 4  # role, finish, usage, [DONE] besides one event per token


def sim_counts(port):
    """(generation tokens, finished requests, running requests) from /metrics."""
    t = metrics(port)
    return (counter(t, "vllm:generation_tokens_total"),
            counter(t, "vllm:request_success_total"),
            counter(t, "vllm:num_requests_running"))


def sampled_run(argv, sim, window, timeout, period=0.5, **popen_kw):
    """Runs argv; every `period` s samples its CPU time and VmRSS and the
    simulator's counters. Returns a dict: returncode, cpu_s (whole run, from
    wait4), maxrss_kb, wall_s, other_cpu_s (busy time on cores 0-1 that
    neither process used), samples, and over window = (t0, t1) seconds after
    the start: win_s, events, events_per_s, cpu_s_win, running_mean/max,
    rss_kb_mid. stdout/stderr go where popen_kw says."""
    t_start = time.monotonic()
    busy0 = cores_busy_s()
    sim0 = proc_cpu_s(sim.pid)
    proc = subprocess.Popen(argv, **popen_kw)
    samples, next_sample = [], period
    while True:
        pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        now = time.monotonic() - t_start
        if now > timeout:
            proc.kill()
            _, st, ru = os.wait4(proc.pid, 0)
            break
        if now >= next_sample:
            try:
                tok, fin, running = sim_counts(sim.port)
                samples.append({"t": now, "cpu": proc_cpu_s(proc.pid),
                                "rss_kb": proc_rss_kb(proc.pid), "tokens": tok,
                                "finished": fin, "running": running})
            except (OSError, ValueError):
                pass
            next_sample += period
        time.sleep(0.01)
    proc.returncode = os.waitstatus_to_exitcode(st)
    cpu = ru.ru_utime + ru.ru_stime
    out = {"returncode": proc.returncode, "cpu_s": round(cpu, 3), "maxrss_kb": ru.ru_maxrss,
           "wall_s": round(time.monotonic() - t_start, 2), "samples": samples}
    out["other_cpu_s"] = round(cores_busy_s() - busy0 - cpu - (proc_cpu_s(sim.pid) - sim0), 2)
    win = [s for s in samples if window[0] <= s["t"] <= window[1]]
    if len(win) >= 2:
        a, b = win[0], win[-1]
        dt = b["t"] - a["t"]
        ev = (b["tokens"] - a["tokens"]) + EVENTS_PER_REQUEST * (b["finished"] - a["finished"])
        out.update({"win_s": round(dt, 2), "events": ev, "events_per_s": round(ev / dt),
                    "cpu_s_win": round(b["cpu"] - a["cpu"], 3),
                    "running_mean": round(sum(s["running"] for s in win) / len(win)),
                    "running_max": max(s["running"] for s in win),
                    "rss_kb_mid": win[len(win) // 2]["rss_kb"]})
    return out


def wait_quiet(max_wait_s=float(os.environ.get("BENCH_QUIET_WAIT", "20")), busy_limit=0.15):
    """Waits (at most max_wait_s) until cores 0-1 are nearly idle over 1 s, so
    other work on a shared machine does not disturb the next measurement.
    Returns the busy fraction seen last."""
    deadline = time.monotonic() + max_wait_s
    warned = False
    while True:
        b0 = cores_busy_s()
        time.sleep(1.0)
        busy = cores_busy_s() - b0
        if busy < busy_limit or time.monotonic() > deadline:
            if busy >= busy_limit:
                log("bench: cores still %.0f%% busy with other work after %.0f s; measuring anyway"
                    % (busy * 100 / 2, max_wait_s))
            return busy
        if not warned:
            log("bench: waiting for other work on cores 0-1 to settle (%.0f%% busy)"
                % (busy * 100 / 2))
            warned = True
