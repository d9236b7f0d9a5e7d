#!/bin/bash
# device_ab.sh — an A/B of two builds on the GPU machine, same run, same model
# files (BENCHMARKS.md): golden q4_0 logits with the new build, then for each
# model of AB_MODELS (mkmodel SHAPE:TYPE) `unicorn bench -p 512 -n 128` with
# the old build (AB_OLD, a `unicorn` binary: tools/device_prep.sh puts the one
# it is given in .devold/) and the new one (bin/), alternating; the new one
# once per environment of AB_NEW_ENVS (assignments joined by commas, "-" for
# none; default "-"), e.g. AB_NEW_ENVS="- UNICORN_VK_WAIT=block".
# AB_TESTS=FILTER first runs those criterion tests on this GPU (.devtest/);
# AB_PROFILE=1 adds one `--profile` decode step per model with the new build.
# Carried: as device_bench.sh, plus .devold/ (.devtest/ for AB_TESTS). Writes
# $OUT/ab.tgz and prints the table.
set -u
. tools/device_env.sh
DEST=$OUT
ROOT=$(mktemp -d)
OLD=${AB_OLD:-.devold/unicorn}
status=0
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; git rev-parse HEAD 2>/dev/null; } |
	tee "$ROOT/gpu.txt"
if [ -n "${AB_TESTS:-}" ] && [ -x .devtest/unicorn-tests ]; then
	UNICORN_BIN=$PWD/bin timeout 240 .devtest/unicorn-tests --filter "$AB_TESTS" --jobs 4 > "$ROOT/tests.txt" 2>&1 || status=1
	tail -1 "$ROOT/tests.txt"
fi
if [ -f .devdata/gemma3-tiny-q4_0.gguf ]; then
	toks=$(python3 -c "import json;print(','.join(map(str,json.load(open('.devdata/gemma3-tiny.json'))['tokens'])))")
	bin/unicorn logits .devdata/gemma3-tiny-q4_0.gguf --tokens "$toks" -o /tmp/g.f32 > /dev/null 2>&1 || status=1
	python3 - <<'PY' | tee "$ROOT/golden.txt"
import numpy as np
a = np.fromfile("/tmp/g.f32", dtype="<f4").reshape(48, -1).astype(np.float64)
b = np.fromfile(".devdata/gemma3-tiny-q4_0.logits.f32", dtype="<f4").reshape(48, -1).astype(np.float64)
rel = np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
print(f"golden q4_0 on GPU: max rel L2 {rel.max():.3e}, argmax {(a.argmax(1) == b.argmax(1)).sum()}/48")
PY
fi
M=/tmp/models
mkdir -p $M
for spec in ${AB_MODELS:-1b:q4_0 4b:q4_0}; do
	shape=${spec%%:*} type=${spec##*:}
	f=$M/$shape-$type.gguf
	/usr/bin/time -f "mkmodel $spec %e s" bin/unicorn-mkmodel --shape $shape --type $type --seed 1 -q -o $f \
		2>> "$ROOT/log.txt" || { status=1; continue; }
	for which in old ${AB_NEW_ENVS:--}; do
		b=bin/unicorn env=()
		[ $which = old ] && b=$OLD
		[ $which != old ] && [ $which != - ] && env=(${which//,/ })
		echo "== $spec ${which/-/new}" >> "$ROOT/table.md"
		env "${env[@]}" $b bench $f -p ${AB_P:-512} -n ${AB_N:-128} -r ${REPS:-3} 2>>"$ROOT/log.txt" |
			grep '^| gemma' >> "$ROOT/table.md" || status=1
	done
	if [ -n "${AB_PROFILE:-}" ]; then
		bin/unicorn bench $f -p 0 -n 16 -r 1 --profile > "$ROOT/profile-$shape-$type.txt" 2>&1
		awk '/decode step/ { f++ } f == 1' "$ROOT/profile-$shape-$type.txt" | head -14
	fi
	rm -f $f
done
grep -h mkmodel "$ROOT/log.txt"
cat "$ROOT/table.md"
tar czf "$DEST/ab.tgz" -C "$ROOT" .
exit $status
