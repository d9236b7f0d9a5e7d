#!/bin/bash
# device_logits_check.sh — on the GPU machine: the decode kernels against the
# prefill kernels on real model shapes, where the goldens (tiny shape) cannot
# reach (e.g. the regrouped q4_0 paths: rows of 256-element multiples, FFN
# down rows of 8192+). For each mkmodel SHAPE:TYPE of CHECK_MODELS, `unicorn
# logits` on CHECK_TOKENS tokens with the prefill kernels (--engine vulkan),
# the decode kernels (--engine vulkan-decode) and the decode kernels under each
# environment of CHECK_ENVS (assignments joined by commas); prints each row set's
# max relative L2 against the prefill logits and the argmax agreement.
# Carried: as device_bench.sh (tools/device_prep.sh fills them).
set -u
. tools/device_env.sh
M=/tmp/models
mkdir -p $M
n=${CHECK_TOKENS:-40}
toks=$(python3 -c "print(','.join(str(3 + (i * 7919 + 11) % 20000) for i in range($n)))")
status=0
for spec in ${CHECK_MODELS:-4b:q4_0}; do
	shape=${spec%%:*} type=${spec##*:}
	f=$M/$shape-$type.gguf
	bin/unicorn-mkmodel --shape $shape --type $type --seed 1 -q -o $f || { status=1; continue; }
	bin/unicorn logits $f --tokens "$toks" -o /tmp/prefill.f32 2>/dev/null || status=1
	i=0
	for k in - ${CHECK_ENVS:-}; do
		env=()
		[ "$k" != - ] && env=(${k//,/ })
		env "${env[@]}" bin/unicorn logits $f --engine vulkan-decode --tokens "$toks" -o /tmp/decode$i.f32 2>/dev/null ||
			status=1
		python3 - "$spec" "$k" /tmp/decode$i.f32 $n <<'PY'
import sys, numpy as np
n = int(sys.argv[4])
a = np.fromfile(sys.argv[3], dtype="<f4").reshape(n, -1).astype(np.float64)
b = np.fromfile("/tmp/prefill.f32", dtype="<f4").reshape(n, -1).astype(np.float64)
ok = np.isfinite(b)
a, b = np.where(ok, a, 0), np.where(ok, b, 0)
rel = np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
print(f"{sys.argv[1]} decode ({sys.argv[2]}) vs prefill: max rel L2 {rel.max():.3e}, "
      f"argmax {(a.argmax(1) == b.argmax(1)).sum()}/{n}")
PY
		i=$((i + 1))
	done
	rm -f $f
done
exit $status
