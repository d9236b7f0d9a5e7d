#!/usr/bin/env python3
"""http_bench.py: serving benchmark of a running Unicorn cluster's OpenAI API.

Usage:
  python3 tools/http_bench.py --url http://127.0.0.1:8642 [--api-key KEY]
      [--streams 1,4,16,64] [--tokens 128] [--prompt TEXT] [--warmup 1]
      [--json OUT.json] [--label NAME] [--timeout 600]

For each C in --streams, C threads start together (a barrier) and each runs one
streaming chat completion (POST /v1/chat/completions, stream true,
stream_options.include_usage, temperature 0, max_tokens N, its own prompt
"Stream i: PROMPT"). Measured per level:
  - aggregate tokens/s: all streams' usage.completion_tokens / wall time (first
    request sent to last stream ended);
  - TTFT: request sent -> first chunk with non-empty content (p50/p99, ms);
  - ITL: gaps between consecutive content chunks of a stream (p50/p99, ms).
    The server sends one chunk per detokenized piece; when it falls behind a
    chunk can carry several tokens (and a token with no text gives no chunk),
    so "chunks/token" is reported too: 1.00 means every gap is one token.
A generation may end before N tokens (end of turn): the counts are the real
ones. Requests that fail (HTTP error, broken stream) are counted as errors and
left out of the figures.

Prints a markdown table on stdout and, with --json, writes every level's
numbers (and the raw settings) as JSON. Python 3 standard library only.
Exit status 1 when any request failed.
"""

import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse


def percentile(xs, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class Target:
    def __init__(self, url, api_key, timeout):
        u = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        if u.scheme != "http":
            raise SystemExit("http_bench: only http:// URLs are supported")
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 80
        path = u.path.rstrip("/")
        if path.endswith("/v1"):
            path = path[:-3]
        self.path = path + "/v1/chat/completions"
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = "Bearer " + api_key
        self.timeout = timeout

    def conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)


EXTRA = {}  # --extra: more body fields (response_format, logit_bias, ...)


def one_stream(target, prompt, max_tokens, barrier, out):
    """One streaming chat completion; fills out (a dict)."""
    req = {
        "model": "bench",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    req.update(EXTRA)
    body = json.dumps(req).encode()
    c = target.conn()
    try:
        if barrier is not None:
            barrier.wait()
        t0 = time.perf_counter()
        out["t0"] = t0
        c.request("POST", target.path, body=body, headers=target.headers)
        r = c.getresponse()
        if r.status != 200:
            out["error"] = "HTTP %d: %s" % (r.status, r.read(300).decode("utf-8", "replace"))
            return
        arrivals = []
        tokens = None
        done = False
        failed = False
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            now = time.perf_counter()
            ev = json.loads(data)
            if ev.get("usage"):
                tokens = ev["usage"].get("completion_tokens")
            for ch in ev.get("choices") or []:
                d = ch.get("delta") or {}
                # content, or a streamed tool call's arguments (tools runs)
                if d.get("content") or any((tc.get("function") or {}).get("arguments")
                                           for tc in d.get("tool_calls") or []):
                    arrivals.append(now)
                if ch.get("finish_reason") == "error":
                    failed = True
        out["t_end"] = time.perf_counter()
        if failed:
            out["error"] = "the server ended the stream with finish_reason \"error\""
            return
        if not done:
            out["error"] = "the stream ended without [DONE]"
            return
        if tokens is None:
            out["error"] = "no usage chunk"
            return
        out["tokens"] = tokens
        out["chunks"] = len(arrivals)
        out["ttft"] = (arrivals[0] - t0) if arrivals else None
        out["gaps"] = [b - a for a, b in zip(arrivals, arrivals[1:])]
    except Exception as e:  # noqa: BLE001 - any failure is one failed request
        out["error"] = "%s: %s" % (type(e).__name__, e)
        out.setdefault("t_end", time.perf_counter())
    finally:
        c.close()


def run_level(target, streams, max_tokens, prompt):
    barrier = threading.Barrier(streams)
    outs = [{} for _ in range(streams)]
    threads = [
        threading.Thread(target=one_stream,
                         args=(target, "Stream %d: %s" % (i + 1, prompt), max_tokens,
                               barrier, outs[i]))
        for i in range(streams)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [o for o in outs if "error" not in o]
    errors = [o["error"] for o in outs if "error" in o]
    t0 = min((o["t0"] for o in outs if "t0" in o), default=0.0)
    t1 = max((o["t_end"] for o in outs if "t_end" in o), default=t0)
    wall = max(t1 - t0, 1e-9)
    tokens = sum(o["tokens"] for o in ok)
    chunks = sum(o["chunks"] for o in ok)
    ttft = [o["ttft"] * 1e3 for o in ok if o["ttft"] is not None]
    gaps = [g * 1e3 for o in ok for g in o["gaps"]]
    rnd = lambda x, n=2: None if x is None else round(x, n)  # noqa: E731
    return {
        "streams": streams,
        "ok": len(ok),
        "errors": len(errors),
        "error_samples": errors[:3],
        "tokens": tokens,
        "tokens_per_stream": rnd(tokens / len(ok), 1) if ok else None,
        "wall_s": rnd(wall, 3),
        "tok_per_s": rnd(tokens / wall, 1),
        "ttft_ms_p50": rnd(percentile(ttft, 50)),
        "ttft_ms_p99": rnd(percentile(ttft, 99)),
        "itl_ms_p50": rnd(percentile(gaps, 50)),
        "itl_ms_p99": rnd(percentile(gaps, 99)),
        "chunks_per_token": rnd(chunks / tokens, 2) if tokens else None,
    }


def fmt(x):
    return "–" if x is None else str(x)


def table(label, rows):
    lines = []
    if label:
        lines.append("**%s**" % label)
        lines.append("")
    lines.append("| streams | tokens | wall s | tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms "
                 "| ITL p99 ms | chunks/token | errors |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        lines.append("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %d |" % (
            r["streams"], r["tokens"], fmt(r["wall_s"]), fmt(r["tok_per_s"]),
            fmt(r["ttft_ms_p50"]), fmt(r["ttft_ms_p99"]), fmt(r["itl_ms_p50"]),
            fmt(r["itl_ms_p99"]), fmt(r["chunks_per_token"]), r["errors"]))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8642",
                    help="server base URL (with or without /v1)")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--streams", default="1,4,16,64",
                    help="comma-separated concurrency levels")
    ap.add_argument("--tokens", type=int, default=128, help="max_tokens per stream")
    ap.add_argument("--prompt", default="Tell me a long story about a unicorn.")
    ap.add_argument("--warmup", type=int, default=1,
                    help="short requests before measuring (0 = none)")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--label", default="", help="a title for the table and JSON")
    ap.add_argument("--extra", default=None,
                    help="a JSON object merged into every request body (e.g. response_format)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="socket timeout per request, seconds")
    a = ap.parse_args()
    if a.extra:
        try:
            EXTRA.update(json.loads(a.extra))
        except (ValueError, TypeError, AttributeError):
            raise SystemExit("http_bench: --extra: a JSON object")
    try:
        levels = [int(x) for x in a.streams.split(",") if x.strip()]
    except ValueError:
        raise SystemExit("http_bench: --streams: comma-separated integers")
    if not levels or min(levels) < 1 or a.tokens < 1:
        raise SystemExit("http_bench: --streams and --tokens must be >= 1")
    target = Target(a.url, a.api_key, a.timeout)
    for i in range(a.warmup):
        o = {}
        one_stream(target, "warm-up %d" % i, min(a.tokens, 8), None, o)
        if "error" in o:
            raise SystemExit("http_bench: warm-up request failed: " + o["error"])
    rows = []
    for c in levels:
        r = run_level(target, c, a.tokens, a.prompt)
        rows.append(r)
        print("http_bench: %d streams: %d tokens in %.3f s, %s tok/s, %d errors" % (
            c, r["tokens"], r["wall_s"], r["tok_per_s"], r["errors"]),
            file=sys.stderr, flush=True)
        for e in r["error_samples"]:
            print("http_bench:   error: " + e, file=sys.stderr)
    print(table(a.label, rows))
    res = {"label": a.label, "url": a.url, "max_tokens": a.tokens, "prompt": a.prompt,
           "levels": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
