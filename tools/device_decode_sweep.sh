#!/bin/bash
# device_decode_sweep.sh — decode mat-vec knobs on the GPU machine, one call
# (BENCHMARKS.md, issue 11): the mat-vec kernels' tests on this GPU, golden
# q4_0 logits, then for each model of SWEEP_MODELS (mkmodel SHAPE:TYPE) `unicorn
# bench -p 0 -n 64` and one `--profile` under each knob set of SWEEP_KNOBS
# (environment assignments joined by commas, e.g.
# UNICORN_VK_MVS_WIDE_BPT=16,UNICORN_VK_MVS_RPT=2; "-" is the engine's defaults).
# Carried: as device_bench.sh (tools/device_prep.sh fills them). Writes
# $OUT/sweep.tgz and prints the table.
set -u
. tools/device_env.sh
DEST=$OUT
ROOT=$(mktemp -d)
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$ROOT/gpu.txt"
if [ -x .devtest/unicorn-tests ]; then
	UNICORN_BIN=$PWD/bin timeout ${TEST_TIMEOUT:-200} .devtest/unicorn-tests --filter "${TEST_FILTER:-vk_ops/mvs*}" \
		--jobs 4 > "$ROOT/tests.txt" 2>&1 || status=1
	tail -2 "$ROOT/tests.txt"
fi
if [ -f .devdata/gemma3-tiny-q4_0.gguf ]; then
	toks=$(python3 -c "import json;print(','.join(map(str,json.load(open('.devdata/gemma3-tiny.json'))['tokens'])))")
	for k in ${SWEEP_KNOBS:--}; do
		env $( [ "$k" != - ] && echo "${k//,/ }") bin/unicorn logits .devdata/gemma3-tiny-q4_0.gguf --tokens "$toks" -o /tmp/g.f32 \
			> /dev/null 2>&1 || status=1
		python3 - "$k" <<'PY' | tee -a "$ROOT/golden.txt"
import sys, numpy as np
a = np.fromfile("/tmp/g.f32", dtype="<f4").reshape(48, -1).astype(np.float64)
b = np.fromfile(".devdata/gemma3-tiny-q4_0.logits.f32", dtype="<f4").reshape(48, -1).astype(np.float64)
rel = np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
print(f"golden q4_0, {sys.argv[1]}: max rel L2 {rel.max():.3e}, argmax {(a.argmax(1) == b.argmax(1)).sum()}/48")
PY
	done
fi
M=/tmp/models
mkdir -p $M
echo "| model | knobs | tg64 tok/s |" > "$ROOT/table.md"
echo "|---|---|---:|" >> "$ROOT/table.md"
for spec in ${SWEEP_MODELS:-27b:q4_0 4b:q4_0 1b:q4_0}; do
	shape=${spec%%:*} type=${spec##*:}
	f=$M/$shape-$type.gguf
	/usr/bin/time -f "mkmodel $spec %e s" bin/unicorn-mkmodel --shape $shape --type $type --seed 1 -q -o $f \
		2>> "$ROOT/log.txt" || { status=1; continue; }
	n=0
	for k in ${SWEEP_KNOBS:--}; do
		env=()
		[ "$k" != "-" ] && env=(${k//,/ })
		r=$(env "${env[@]}" bin/unicorn bench $f -p 0 -n 64 -r ${REPS:-2} 2>>"$ROOT/log.txt" | grep -o 'tg64 *| *[0-9.]* ± [0-9.]*' |
			sed 's/tg64 *| *//')
		echo "| $spec | $k | $r |" | tee -a "$ROOT/table.md"
		env "${env[@]}" bin/unicorn bench $f -p 0 -n 16 -r 1 --profile > "$ROOT/profile-$shape-$type-$n.txt" 2>&1
		n=$((n + 1))
	done
	rm -f $f
done
grep -h "mkmodel" "$ROOT/log.txt"
for f in "$ROOT"/profile-*.txt; do
	echo "$(basename "$f"): $(grep -m1 'decode step' "$f" | sed 's/.*GPU/GPU/'); $(grep -m1 'rmsnorm+res+norm' "$f" | tr -s ' ');" \
		"$(grep -m1 'matrices:' "$f" | sed 's/ *matrices: //')"
done
cat "$ROOT/golden.txt" "$ROOT/table.md"
tar czf "$DEST/sweep.tgz" -C "$ROOT" .
exit $status
