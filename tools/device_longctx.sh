#!/bin/bash
# device_longctx.sh — long contexts on the GPU machine (issue 30): for
# BENCHMARKS.md, against llama.cpp's `llama-bench -d` anchors (H100: tg128 at
# depth 0 / 8,192: 1B 347.5 / 314.0 tok/s, 27B 68.3 / 67.0).
#   bench  `unicorn bench -p 0 -n 128 -d 0,8192,32768` on mkmodel's 1B and 27B
#          shapes (Q4_0, f16 KV cache; the 1B file with --ctx 33024: its own
#          32,768 positions cannot hold 128 tokens after a depth of 32,768)
#   api    a ~100,000-token prompt on 27B through the OpenAI API (one cluster,
#          --max-seqs 1, the model's 131,072-position context): the prompt is
#          sized with POST /tokenize, sent streamed; TTFT and prompt tok/s
#          (prompt tokens / TTFT), after a short warm-up request
#   start  27B with --max-seqs 64 and --kv-budget auto: the budget it chose
#          (unicorn status), or why it did not start
# Same carried folders as device_bench.sh (bin/ from .devbin, .gl/, .devlibs/);
# writes to $OUT: log.txt, table.md (the bench tables), bench-SHAPE.json,
# longprompt.json / longprompt.md, up-*.log, start.txt.
#
# Usage (repository root, on the device):  tools/device_longctx.sh
# Environment (defaults in brackets):
#   LONGCTX_PARTS ["bench api start"]  which parts, in this order
#   LONGCTX_SHAPES ["1b 27b"]          bench shapes (mkmodel, Q4_0)
#   LONGCTX_DEPTHS [0,8192,32768]      bench -d
#   LONGCTX_TOKENS [100000]            the long prompt's target token count
#   LONGCTX_SHAPE [27b]                the api/start parts' model shape
#   REPS [3]                           bench repetitions
#   PORT [8651]
#   LONGCTX_GGUF                       the api/start parts' model instead of mkmodel's
#   LONGCTX_LOCAL=1                    not on the device: skip tools/device_env.sh
#                                      (it unpacks the carried Vulkan loader into /), e.g.
#   LONGCTX_LOCAL=1 LONGCTX_PARTS=api LONGCTX_TOKENS=40000 LONGCTX_GGUF=/tmp/tinyctx1.gguf \
#     OUT=/tmp/lc tools/device_longctx.sh
#   (tinyctx1.gguf: unicorn-mkmodel --shape tinyctx --layers 1 --vocab
#   ../shared/golden/gemma3-tiny-f32.gguf)
# A 27B file (~15 GiB) is written once into /tmp/models and kept for the
# next part or call while the machine stays warm. One call runs at most 10
# minutes: on an H100 run "bench" and "api start" as two calls if the first
# one runs long (its log says where it stopped).
set -u
. tools/device_lib.sh
device_setup "${LONGCTX_LOCAL:-}"
log() { echo "== $(date +%T) $*" | tee -a "$OUT/log.txt"; }
PARTS=${LONGCTX_PARTS:-bench api start}
PORT=${PORT:-8651}
M=/tmp/models
mkdir -p $M
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1 | tee -a "$OUT/log.txt"
bin/unicorn devices | tee -a "$OUT/log.txt"
status=0

model() { # SHAPE [run|CTX] -> path of its Q4_0 file (written once); CTX: mkmodel --ctx
	if [ -n "${LONGCTX_GGUF:-}" ] && [ "${2:-}" = run ]; then
		echo "$LONGCTX_GGUF"
		return
	fi
	local ctx=
	case ${2:-} in [0-9]*) ctx=$2 ;; esac
	local f=$M/$1-q4_0${ctx:+-ctx$ctx}.gguf
	if [ ! -s "$f" ]; then
		log "mkmodel $1 q4_0${ctx:+ --ctx $ctx}" >&2
		/usr/bin/time -f "mkmodel $1 %e s" bin/unicorn-mkmodel --shape "$1" --type q4_0 --seed 1 ${ctx:+--ctx $ctx} \
			-q -o "$f" 2>&1 | tail -2 | tee -a "$OUT/log.txt" >&2
	fi
	echo "$f"
}

for part in $PARTS; do
case $part in
bench)
	for shape in ${LONGCTX_SHAPES:-1b 27b}; do
		# 1B reads 32,768 positions: 128 tokens after a depth of 32,768 need a
		# longer one (llama-bench sizes its context to depth + n the same way)
		if [ "$shape" = 1b ]; then f=$(model "$shape" 33024); else f=$(model "$shape"); fi
		log "bench $shape: tg128 at depths ${LONGCTX_DEPTHS:-0,8192,32768}"
		bin/unicorn bench "$f" -p 0 -n 128 -d "${LONGCTX_DEPTHS:-0,8192,32768}" -r "${REPS:-3}" --json \
			> "$OUT/bench-$shape.json" 2>>"$OUT/log.txt" || status=1
		python3 - "$OUT/bench-$shape.json" "$shape" <<'PY' | tee -a "$OUT/table.md"
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"{sys.argv[2]}: no bench JSON ({e})"); sys.exit(0)
rows = j.get("tests") or []
print(f"\n{sys.argv[2]} Q4_0, KV {j.get('kv_type', '?')} ({j.get('gpu', '?')}):\n\n| test | tok/s |\n|---|---:|")
for r in rows:
    print(f"| {r.get('test', '?')} | {r.get('avg_ts', 0):.2f} ± {r.get('stddev_ts', 0):.2f} |")
if not rows:
    print(json.dumps(j)[:2000])
PY
	done
	;;
api)
	f=$(model "${LONGCTX_SHAPE:-27b}" run)
	name=lctx
	log "api: unicorn-up ${LONGCTX_SHAPE:-27b} --max-seqs 1 (context: the model's)"
	bin/unicorn-up --model "$f" --name $name --port $PORT --max-seqs 1 --request-timeout 1800 \
		> "$OUT/up-api.log" 2>&1 &
	up=$!
	if ! cluster_wait_ready "http://127.0.0.1:$PORT" $up $(($(date +%s) + 300)); then
		log "api: the cluster did not become ready"; tail -30 "$OUT/up-api.log" | tee -a "$OUT/log.txt"
		status=1
	else
		bin/unicorn status --name $name | tee -a "$OUT/log.txt"
		python3 - "$PORT" "${LONGCTX_TOKENS:-100000}" "$OUT" <<'PY' 2>&1 | tee -a "$OUT/log.txt"
import http.client, json, sys, time
port, target, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def post(path, body, timeout=1800):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    return c, c.getresponse()
def ntok(text):
    c, r = post("/tokenize", {"text": text})
    return len(json.loads(r.read())["tokens"])
# a text of about `target` tokens whatever the vocabulary (mkmodel's real
# one, or synthetic tokens): sized by /tokenize, twice
words = "the quick brown fox jumps over a lazy dog while seven wizards quietly hum".split()
def text_of(n):
    return " ".join(words[i % len(words)] + (str(i % 97) if i % 5 == 0 else "") for i in range(n))
n = target
for _ in range(3):
    t = ntok(text_of(n))
    n = max(1, int(n * target / t))
text = text_of(n)
tokens = ntok(text)
print(f"long prompt: {len(text)} bytes, {tokens} tokens (with BOS)")
def run(prompt, max_tokens):
    t0 = time.time()
    c, r = post("/v1/completions", {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                                    "stream": True, "stream_options": {"include_usage": True}})
    if r.status != 200:
        return {"status": r.status, "error": r.read().decode()[:1000]}
    ttft, n, usage = None, 0, None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]
        if ev.get("choices") and ev["choices"][0].get("text"):
            n += 1
            if ttft is None:
                ttft = time.time() - t0
    total = time.time() - t0
    return {"status": 200, "ttft_s": ttft, "total_s": total, "chunks": n, "usage": usage}
warm = run("Once upon a time", 8)
print("warm-up:", json.dumps(warm))
res = run(text, 32)
res["prompt_bytes"] = len(text)
res["prompt_tokens_tokenize"] = tokens
pt = (res.get("usage") or {}).get("prompt_tokens", tokens)
if res.get("ttft_s"):
    res["prompt_tok_s"] = pt / res["ttft_s"]
    ct = (res.get("usage") or {}).get("completion_tokens", 0)
    if ct > 1 and res["total_s"] > res["ttft_s"]:
        res["decode_tok_s"] = (ct - 1) / (res["total_s"] - res["ttft_s"])
print("long prompt:", json.dumps(res))
json.dump(res, open(f"{out}/longprompt.json", "w"), indent=1)
with open(f"{out}/longprompt.md", "w") as f:
    f.write(f"| prompt tokens | TTFT s | prompt tok/s | decode tok/s after it |\n|---:|---:|---:|---:|\n")
    f.write(f"| {pt} | {res.get('ttft_s', 0) or 0:.2f} | {res.get('prompt_tok_s', 0):.1f} | {res.get('decode_tok_s', 0):.2f} |\n")
sys.exit(0 if res.get("status") == 200 and res.get("ttft_s") else 1)
PY
		[ "${PIPESTATUS[0]}" = 0 ] || status=1
		cat "$OUT/longprompt.md" 2>/dev/null | tee -a "$OUT/table.md"
		grep -E "prompt tokens|recovering|no DONE|kv-budget|KV cache" "$OUT/up-api.log" | tail -20 | tee -a "$OUT/log.txt"
		bin/unicorn down --name $name | tee -a "$OUT/log.txt"
	fi
	wait $up 2>/dev/null
	;;
start)
	f=$(model "${LONGCTX_SHAPE:-27b}" run)
	log "start: ${LONGCTX_SHAPE:-27b} --max-seqs 64 --kv-budget auto"
	t0=$(date +%s.%N)
	bin/unicorn-up --model "$f" --name lstart --no-http --max-seqs 64 > "$OUT/up-start.log" 2>&1 &
	up=$!
	ok=
	for i in $(seq 1 600); do
		kill -0 $up 2>/dev/null || break
		[ -f "$XDG_RUNTIME_DIR/unicorn/lstart/ready" ] && { ok=1; break; }
		sleep 0.5
	done
	t1=$(date +%s.%N)
	if [ -n "$ok" ]; then
		echo "started in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s" | tee "$OUT/start.txt"
		bin/unicorn status --name lstart | tee -a "$OUT/start.txt"
		grep -h "kv-budget auto" "$OUT/up-start.log" | tee -a "$OUT/start.txt"
		bin/unicorn down --name lstart >/dev/null
	else
		echo "did not start:" | tee "$OUT/start.txt"
		tail -20 "$OUT/up-start.log" | tee -a "$OUT/start.txt"
		status=1
	fi
	wait $up 2>/dev/null
	;;
*) echo "device_longctx: unknown part '$part' (bench, api, start)" >&2; status=2 ;;
esac
done
log "done (status $status)"
exit $status
