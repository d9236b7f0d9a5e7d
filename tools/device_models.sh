#!/bin/bash
# device_models.sh — issue 10 and 11 figures in one run on the GPU machine
# (BENCHMARKS.md): the kernels' tests on this GPU (the criterion binary
# carried in .devtest/, matrix-core tests included: they skip on lavapipe),
# then device_bench.sh's golden logits and `unicorn bench` pp512/tg128 of the
# model files MODELS lists (mkmodel SHAPE:TYPE, TYPE a tensor type or a
# llama.cpp preset such as q4_k_m). UNICORN_NO_COOPMAT=1 in the environment
# gives the prefill without matrix cores.
# Carried: bin/, .gl/, .devlibs/, .devdata/, .devtest/. Writes $OUT/models.tgz
# and prints the tables.
set -u
. tools/device_env.sh
DEST=$OUT
ROOT=$(mktemp -d)
status=0
if [ -x .devtest/unicorn-tests ]; then
	LD_LIBRARY_PATH=$PWD/.devtest:$LD_LIBRARY_PATH UNICORN_BIN=$PWD/bin timeout ${TEST_TIMEOUT:-240} \
		.devtest/unicorn-tests --filter "${TEST_FILTER:-vk_ops/*}" --jobs 4 > "$ROOT/tests.txt" 2>&1 || status=1
	tail -3 "$ROOT/tests.txt"
fi
mkdir -p "$ROOT/bench"
OUT=$ROOT/bench BENCH_MODELS=${MODELS:-1b:q4_k_m 1b:q5_k_m 1b:iq4_xs 1b:q3_k_m} REPS=${REPS:-3} \
	bash tools/device_bench.sh > "$ROOT/bench/out.txt" 2>&1 || status=1
cat "$ROOT/bench/table.md" 2>/dev/null
grep -h "golden\|mkmodel [0-9]" "$ROOT/bench/log.txt" 2>/dev/null
tar czf "$DEST/models.tgz" -C "$ROOT" .
exit $status
