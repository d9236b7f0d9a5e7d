#!/bin/bash
# device_serving.sh — serving benchmark over the OpenAI HTTP API on the GPU
# machine: for each placement (fused, split) start
#   unicorn-up --model M --placement P --max-seqs 64 --name sP --port PORT
# on mkmodel's 1b q4_0 model, wait for ready (GET /health = 200), run
# tools/http_bench.py at 1/4/16/64 concurrent streaming chat completions
# (temperature 0), then `unicorn down`. Same carried folders as
# device_bench.sh (bin/, .gl/, .devlibs/); writes to $OUT:
#   serving-P.log (cluster log), serving-P.md / serving-P.json (http_bench),
#   serving.md (both tables).
#
# Usage (repository root, on the device):  tools/device_serving.sh
# Environment (defaults in brackets):
#   SERVING_MODEL [1b]        mkmodel shape of the q4_0 model
#   SERVING_GGUF              use this GGUF instead of writing one with mkmodel
#   SERVING_PLACEMENTS ["fused split"]
#   SERVING_STREAMS [1,4,16,64]   concurrency levels
#   SERVING_TOKENS [128]      max_tokens per stream
#   SERVING_MAX_SEQS [64]     --max-seqs (must be >= the largest level)
#   SERVING_PORT [8650]       HTTP port (fixed: an explicit port must bind)
#   SERVING_KV_BUDGET         unicorn-up --kv-budget (default: auto)
#   SERVING_UP_ARGS           more unicorn-up options, e.g. "--attn-device 0 --ffn-device 1"
#   SERVING_PREFIX=1          also, per placement: a long prompt (1012 tokens on
#                             mkmodel's tokenizer)
#                             sent alone twice, cold then with its prefix cached
#                             (TTFT of each in serving.md)
#   UNICORN_BATCH_MM_MIN [8] decode tokens from which a fused round's decode rows
#                             run the mat-mat kernel (0 = only beside prompt chunks)
#   UNICORN_BATCH_TOKENS [512] rows one fused round feeds (prompt chunks of all
#                             sequences together); both reach the coordinator
#                             through unicorn-up's environment (docs/coordinator.md)
#   BIN [bin]                 where the binaries are
#   SERVING_LOCAL=1           not on the device: skip tools/device_env.sh (it
#                             unpacks the carried Vulkan loader into /), e.g.
#   SERVING_LOCAL=1 BIN=build/x/bin SERVING_GGUF=../shared/golden/gemma3-tiny-q4_0.gguf \
#     SERVING_STREAMS=1,4 SERVING_TOKENS=16 SERVING_MAX_SEQS=4 OUT=/tmp/sv tools/device_serving.sh
# Exit status: 0 when every placement came up and every request succeeded.
set -u
. tools/device_lib.sh
device_setup "${SERVING_LOCAL:-}"
BIN=${BIN:-bin}
PORT=${SERVING_PORT:-8650}
STREAMS=${SERVING_STREAMS:-1,4,16,64}
N=${SERVING_TOKENS:-128}
SEQS=${SERVING_MAX_SEQS:-64}
if [ -n "${SERVING_GGUF:-}" ]; then
	M=$SERVING_GGUF
else
	M=/tmp/models/${SERVING_MODEL:-1b}-q4_0.gguf
	mkdir -p /tmp/models
	[ -f "$M" ] || "$BIN"/unicorn-mkmodel --shape "${SERVING_MODEL:-1b}" --type q4_0 --seed 1 -q -o "$M" || exit 1
fi
status=0
: > "$OUT/serving.md"
for placement in ${SERVING_PLACEMENTS:-fused split}; do
	name=s$placement
	log=$OUT/serving-$placement.log
	"$BIN"/unicorn-up --model "$M" --placement "$placement" --max-seqs "$SEQS" --name "$name" \
		--port "$PORT" ${SERVING_KV_BUDGET:+--kv-budget "$SERVING_KV_BUDGET"} ${SERVING_UP_ARGS:-} > "$log" 2>&1 &
	up=$!
	if ! cluster_wait_ready "http://127.0.0.1:$PORT" $up $(($(date +%s) + 240)); then
		echo "device_serving: $placement: the cluster did not become ready (log $log):" >&2
		tail -20 "$log" >&2
		"$BIN"/unicorn down --name "$name" > /dev/null 2>&1
		wait $up 2>/dev/null
		status=1
		continue
	fi
	echo "== $placement: ready, http_bench streams $STREAMS, $N tokens" | tee -a "$OUT/serving.md"
	python3 tools/http_bench.py --url "http://127.0.0.1:$PORT" --streams "$STREAMS" \
		--tokens "$N" --label "$placement, $(basename "$M"), max-seqs $SEQS" \
		--json "$OUT/serving-$placement.json" > "$OUT/serving-$placement.md" || status=1
	cat "$OUT/serving-$placement.md" | tee -a "$OUT/serving.md"
	echo | tee -a "$OUT/serving.md"
	if [ -n "${SERVING_PREFIX:-}" ]; then
		long=$(python3 -c "print(' '.join(['The unicorn walked through the silver forest and counted every tree it passed.'] * 9))")
		for run in cold cached; do
			echo "== $placement: long prompt, $run" | tee -a "$OUT/serving.md"
			python3 tools/http_bench.py --url "http://127.0.0.1:$PORT" --streams 1 --warmup 0 \
				--tokens 16 --prompt "$long" --label "$placement, long prompt, $run" \
				--json "$OUT/prefix-$placement-$run.json" | tee -a "$OUT/serving.md" || status=1
		done
	fi
	# the handoff histogram (Prometheus text) for p50/p99
	python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics', timeout=5).read().decode())" \
		> "$OUT/metrics-$placement.prom" 2>/dev/null
	sleep 1.5 # let the coordinator go idle and print its report
	"$BIN"/unicorn status --name "$name" >> "$OUT/serving.md" 2>&1
	"$BIN"/unicorn down --name "$name" || status=1
	wait $up 2>/dev/null
	grep 'coordinator: \(fused\|split\):' "$log" | tee -a "$OUT/serving.md"
done
exit $status
