#!/bin/bash
# device_vision.sh — issue 33's figures on the GPU machine: Gemma 3's vision
# tower (gpu_worker/vision.c) on the 4B and 27B shapes. mkmodel writes each
# text model with --vision (a random-weight mmproj-*.gguf in llama.cpp's
# layout, f16 matrices as the published mmproj files), then
# unicorn-vision-bench times the upload and the encode of one image (896 px,
# 4,096 patches, 27 layers, 256 tokens). A tiny shape is checked against the
# CPU reference first, so a wrong tower on this GPU is not timed.
# Carried: bin/ (built with tools/device_prep.sh), .gl/, .devlibs/.
# Usage (from the repository root on the device):
#   rm -rf bin && mv .devbin bin && bash tools/device_vision.sh
# Writes $OUT/vision.txt. Then (TTFT=1, the default) the time to first token
# of one image + a short prompt through the HTTP API on whole 4B and 27B
# models (q4_0, random weights, --vision beside them): unicorn-up on each,
# a warm-up text request, then streamed image requests: a first image (its
# decode, preprocessing, encode and prefill), the same image again (the
# prefix cache holds it), another image. TTFT=0 skips it; TTFT_SHAPES picks
# the shapes (default "4b 27b"); TTFT_PORT the port (default 18480).
set -u
. tools/device_env.sh
. tools/device_lib.sh
ROOT=$(mktemp -d)
LOG=$OUT/vision.txt
status=0
{
	echo "== tiny: GPU vs CPU reference (matrix cores, then without)"
	bin/unicorn-mkmodel --shape tiny --layers 1 --vision --type f32 -q -o "$ROOT/tiny.gguf" &&
		bin/unicorn-vision-bench "$ROOT/mmproj-tiny.gguf" --check --reps 3 || status=1
	UNICORN_NO_COOPMAT=1 bin/unicorn-vision-bench "$ROOT/mmproj-tiny.gguf" --check --reps 3 || status=1
	for shape in ${SHAPES:-4b 27b}; do
		echo "== $shape (text layers 1: only the mmproj is timed)"
		# --layers 1: the text model is only there to name the projection width
		bin/unicorn-mkmodel --shape "$shape" --layers 1 --type q4_0 --vision -q -o "$ROOT/$shape.gguf" || { status=1; continue; }
		bin/unicorn-vision-bench "$ROOT/mmproj-$shape.gguf" --reps ${REPS:-10} || status=1
		echo "-- $shape without matrix cores"
		UNICORN_NO_COOPMAT=1 bin/unicorn-vision-bench "$ROOT/mmproj-$shape.gguf" --reps ${REPS:-10} || status=1
		rm -f "$ROOT/$shape.gguf" "$ROOT/mmproj-$shape.gguf"
	done
	PORT=${TTFT_PORT:-18480}
	[ "${TTFT:-1}" = 0 ] && TTFT_SHAPES=" "
	for shape in ${TTFT_SHAPES:-4b 27b}; do
		echo "== $shape: TTFT of an image + a short prompt (HTTP API, streamed, temperature 0)"
		M=$ROOT/$shape-full.gguf
		bin/unicorn-mkmodel --shape "$shape" --type q4_0 --vision -q -o "$M" || { status=1; continue; }
		log=$OUT/vision-up-$shape.log
		bin/unicorn-up --model "$M" --name "vis$shape" --port "$PORT" --max-seqs 4 --ctx 4096 > "$log" 2>&1 &
		up=$!
		if ! cluster_wait_ready "http://127.0.0.1:$PORT" $up $(($(date +%s) + 300)); then
			echo "device_vision: $shape: the cluster did not become ready:"; tail -20 "$log"
			bin/unicorn down --name "vis$shape" > /dev/null 2>&1; wait $up 2>/dev/null
			status=1; rm -f "$M" "$ROOT/mmproj-$shape-full.gguf"; continue
		fi
		python3 - "$PORT" <<'PY' || status=1
import base64, json, struct, sys, time, urllib.request, zlib
port = sys.argv[1]
def png(w, h, seed):
    rows = []
    for y in range(h):
        rows.append(b"\x00" + bytes(((x * 7 + y * 13 + seed * 97) ^ (x * y)) & 255 for x in range(w * 3)))
    raw = b"".join(rows)
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
imgs = [base64.b64encode(png(1024, 768, s)).decode() for s in (1, 2)]
def ttft(content):
    body = json.dumps({"max_tokens": 16, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": content}]}).encode()
    req = urllib.request.Request("http://127.0.0.1:%s/v1/chat/completions" % port, body,
                                 {"Content-Type": "application/json"})
    t0 = time.monotonic(); first = None; usage = None
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            j = json.loads(line[6:])
            if j.get("usage"):
                usage = j["usage"]
            for ch in j.get("choices", []):
                if first is None and ch.get("delta", {}).get("content"):
                    first = time.monotonic()
    t1 = time.monotonic()
    return (first or t1) - t0, t1 - t0, usage
def part(i):
    return [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + imgs[i]}},
            {"type": "text", "text": "Describe this image in one sentence."}]
for name, content in (("text only (warm-up)", "Describe a cat in one sentence."),
                      ("text only", "Describe a dog in one sentence."),
                      ("image A (decode + encode + prefill)", part(0)),
                      ("image A again (prefix cache)", part(0)),
                      ("image B (decode + encode + prefill)", part(1))):
    f, t, u = ttft(content)
    print("%-38s TTFT %8.1f ms   16 tokens %8.1f ms   prompt tokens %s" %
          (name, f * 1e3, t * 1e3, u and u.get("prompt_tokens")))
PY
		env -u LD_LIBRARY_PATH curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^unicorn_kv_prefix_hit_tokens_total|^unicorn_ttft' | head -5
		bin/unicorn down --name "vis$shape" > /dev/null 2>&1 || status=1
		wait $up 2>/dev/null
		rm -f "$M" "$ROOT/mmproj-$shape-full.gguf"
	done
	exit $status
} 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
rm -rf "$ROOT"
exit $status
