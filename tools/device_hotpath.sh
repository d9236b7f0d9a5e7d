#!/bin/bash
# device_hotpath.sh — issue 13's measurements in one run on the GPU machine
# (BENCHMARKS.md "The hot path on shared memory"):
#   1. device_bench.sh: golden logits on the GPU, then `unicorn bench` pp512/tg128
#      of the 1B and 4B Q4_0 shapes (the engine alone: per-token time);
#   2. the ring round-trip microbenchmark between two processes (test ring/*);
#   3. serving over the OpenAI API (device_serving.sh): 1B fused and split at
#      1/4/16/64 streams, then 4B fused at one stream (ITL vs tg128);
#   4. with HOTPATH_TWO_GPUS=1 (the two-GPU host): split with attention on GPU 0
#      and FFN on GPU 1 against fused on GPU 0, 1B at 4/16/64 streams.
# Carried: bin/, .gl/, .devlibs/, .devdata/ and .devtest/ (the test binary and the
# libraries Criterion needs).
# Writes everything to $OUT/hotpath.tgz (folders bench/, s1b/, s4b/, two/: the
# device returns few files) and prints the tables.
set -u
. tools/device_env.sh
DEST=$OUT
ROOT=$(mktemp -d)
status=0
mkdir -p "$ROOT/bench"
OUT=$ROOT/bench BENCH_MODELS=${HOTPATH_BENCH_MODELS:-1b:q4_0 4b:q4_0} REPS=${REPS:-3} \
	bash tools/device_bench.sh > "$ROOT/bench/out.txt" 2>&1 || status=1
# the ring benchmark from the test binary (carried in .devtest/ with Criterion's libraries)
if [ -x .devtest/unicorn-tests ]; then
	LD_LIBRARY_PATH=$PWD/.devtest:$LD_LIBRARY_PATH UNICORN_BIN=$PWD/bin .devtest/unicorn-tests \
		--filter 'ring/*' > "$ROOT/ring.txt" 2>&1 || status=1
fi
if [ -z "${HOTPATH_TWO_GPUS:-}" ]; then
	mkdir -p "$ROOT/s1b" "$ROOT/s4b"
	OUT=$ROOT/s1b SERVING_MODEL=1b SERVING_STREAMS=${HOTPATH_STREAMS:-1,4,16,64} SERVING_MAX_SEQS=64 \
		bash tools/device_serving.sh > "$ROOT/s1b/out.txt" 2>&1 || status=1
	OUT=$ROOT/s4b SERVING_MODEL=4b SERVING_PLACEMENTS=fused SERVING_STREAMS=1 SERVING_MAX_SEQS=4 \
		bash tools/device_serving.sh > "$ROOT/s4b/out.txt" 2>&1 || status=1
else
	mkdir -p "$ROOT/two/fused" "$ROOT/two/split"
	OUT=$ROOT/two/fused SERVING_MODEL=1b SERVING_PLACEMENTS=fused SERVING_STREAMS=4,16,64 SERVING_MAX_SEQS=64 \
		SERVING_UP_ARGS="--vk-device 0" bash tools/device_serving.sh > "$ROOT/two/fused/out.txt" 2>&1 || status=1
	OUT=$ROOT/two/split SERVING_MODEL=1b SERVING_PLACEMENTS=split SERVING_STREAMS=4,16,64 SERVING_MAX_SEQS=64 \
		SERVING_UP_ARGS="--attn-device 0 --ffn-device 1" bash tools/device_serving.sh > "$ROOT/two/split/out.txt" 2>&1 || status=1
fi
cat "$ROOT"/bench/table.md "$ROOT"/bench/log.txt 2>/dev/null | grep -v '^== '
grep -h 'round trip\|p50' "$ROOT/ring.txt" 2>/dev/null
cat "$ROOT"/s1b/serving.md "$ROOT"/s4b/serving.md "$ROOT"/two/*/serving.md 2>/dev/null
for f in "$ROOT"/s1b/*.prom "$ROOT"/two/*/*.prom; do [ -f "$f" ] && echo "$f" && grep 'handoff_latency_seconds_bucket' "$f"; done
tar czf "$DEST/hotpath.tgz" -C "$ROOT" .
exit $status
