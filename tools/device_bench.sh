#!/bin/bash
# device_bench.sh — the benchmark run on the GPU machine (see BENCHMARKS.md).
# Expects bin/ built, .gl/ (Vulkan loader .debs), .devlibs/ (shared libraries
# the binaries need) and .devdata/ (golden files) carried along; writes to $OUT.
set -u
. tools/device_env.sh
log() { echo "== $*" | tee -a "$OUT/log.txt"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
bin/unicorn devices | tee -a "$OUT/gpu.txt"
git rev-parse HEAD 2>/dev/null | tee -a "$OUT/gpu.txt"

# correctness on this GPU first: golden logits through the Vulkan engine
if [ -d .devdata ]; then
	toks=$(python3 -c "import json;print(','.join(map(str,json.load(open('.devdata/gemma3-tiny.json'))['tokens'])))")
	for enc in f32 q4_0; do
		[ -f .devdata/gemma3-tiny-$enc.gguf ] || continue
		bin/unicorn logits .devdata/gemma3-tiny-$enc.gguf --tokens "$toks" -o /tmp/$enc.f32 2>&1 | tee -a "$OUT/log.txt"
		python3 - "$enc" <<'PY' | tee -a "$OUT/log.txt"
import sys, numpy as np
enc = sys.argv[1]
a = np.fromfile(f"/tmp/{enc}.f32", dtype="<f4").reshape(48, -1).astype(np.float64)
b = np.fromfile(f".devdata/gemma3-tiny-{enc}.logits.f32", dtype="<f4").reshape(48, -1).astype(np.float64)
rel = np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
print(f"golden {enc} on GPU: max rel L2 {rel.max():.3e}, argmax equal at {(a.argmax(1) == b.argmax(1)).sum()}/48")
PY
	done
fi

M=/tmp/models
mkdir -p $M
for spec in ${BENCH_MODELS:-1b:q4_0 1b:q8_0 4b:q4_0}; do
	shape=${spec%%:*} type=${spec##*:}
	f=$M/$shape-$type.gguf
	log "mkmodel $shape $type"
	/usr/bin/time -f "mkmodel %e s" bin/unicorn-mkmodel --shape $shape --type $type --seed 1 -o $f 2>&1 | tail -2 | tee -a "$OUT/log.txt"
	log "bench $shape $type"
	bin/unicorn bench $f -p 512 -n 128 -r ${REPS:-5} --json > "$OUT/bench-$shape-$type.json" 2>>"$OUT/log.txt"
	bin/unicorn bench $f -p 512 -n 128 -r ${REPS:-5} 2>/dev/null | tee -a "$OUT/table.md"
	rm -f $f
done
