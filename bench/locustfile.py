"""Locust user for bench/locust_compare.py: streams chat completions from an
OpenAI-compatible server and counts SSE "data:" events.

Every user loops: POST /v1/chat/completions with stream=true (the same body
`tokenstorm run` sends: max_tokens, ignore_eos, stream_options.include_usage),
reads the event stream line by line and counts the lines that start with
"data:". Settings come from the environment:

  BENCH_MODEL       model id (default tokenstorm/tiny)
  BENCH_MAX_TOKENS  max_tokens of each request (default 200)
  BENCH_EVENTS_OUT  file that gets {"events": N, "requests": N} at the end
  BENCH_PARSE_JSON  1: also json.loads() each event but [DONE] and count the
                    content chunks, as a user that measures tokens would
"""

import json
import os

from locust import HttpUser, events, task

MODEL = os.environ.get("BENCH_MODEL", "tokenstorm/tiny")
MAX_TOKENS = int(os.environ.get("BENCH_MAX_TOKENS", "200"))
PARSE_JSON = os.environ.get("BENCH_PARSE_JSON") == "1"
BODY = {
    "model": MODEL,
    "stream": True,
    "max_tokens": MAX_TOKENS,
    "ignore_eos": True,
    "stream_options": {"include_usage": True},
    "messages": [{"role": "user", "content": "hi"}],
}
COUNTS = {"events": 0, "requests": 0, "content_chunks": 0}


class StreamingUser(HttpUser):
    @task
    def chat(self):
        n = chunks = 0
        with self.client.post("/v1/chat/completions", json=BODY, stream=True,
                              catch_response=True, name="chat stream") as r:
            if r.status_code != 200:
                r.failure("HTTP %d" % r.status_code)
                return
            for line in r.iter_lines():
                if line.startswith(b"data:"):
                    n += 1
                    if PARSE_JSON and line[5:].strip() != b"[DONE]":
                        ev = json.loads(line[5:])
                        for ch in ev.get("choices") or ():
                            if (ch.get("delta") or {}).get("content"):
                                chunks += 1
            COUNTS["events"] += n
            COUNTS["content_chunks"] += chunks
            COUNTS["requests"] += 1
            r.success()


@events.quitting.add_listener
def _write_counts(environment, **kw):
    path = os.environ.get("BENCH_EVENTS_OUT")
    if path:
        with open(path, "w") as f:
            json.dump(COUNTS, f)
