#!/bin/bash
# device_parallel.sh — on the GPU machine: many sequences and long prompts
# (issue 29). For each model of PAR_MODELS (default "1b:q4_0 27b:q4_0"):
# unicorn bench -p PAR_PP -n 0, then --parallel PAR_B with PAR_GEN tokens per
# sequence and --profile (one step of the largest B, narrow and wide).
# Builds: every directory of PAR_BINS (default "bin") in turn, same model file,
# each under every environment setting of PAR_ENVS (default: none; e.g.
# "UNICORN_VK_MM_SPLIT=0,UNICORN_VK_MM_DTILE=0 NONE=1" for an A/B of one
# build; commas separate the variables of one setting).
set -u
. tools/device_env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
M=/tmp/models
mkdir -p $M
for spec in ${PAR_MODELS:-1b:q4_0 27b:q4_0}; do
	shape=${spec%%:*} type=${spec##*:}
	f=$M/$shape-$type.gguf
	/usr/bin/time -f "mkmodel $shape %e s" bin/unicorn-mkmodel --shape $shape --type $type --seed 1 -o $f 2>&1 | tail -1 | tee -a "$OUT/log.txt"
	for b in ${PAR_BINS:-bin}; do
	for ev in ${PAR_ENVS:-NONE=1}; do
		tag=$(basename $b)-$(echo "$ev" | tr -c "A-Za-z0-9\n" _)
		echo "== $b $ev $shape $type" | tee -a "$OUT/table.md"
		[ -n "${PAR_PP:-512}" ] && env ${ev//,/ } $b/unicorn bench $f -p ${PAR_PP:-512} -n 0 -r ${REPS:-2} 2>>"$OUT/log.txt" | tee -a "$OUT/table.md"
		[ -n "${PAR_PP_PROFILE:-}" ] && env ${ev//,/ } $b/unicorn bench $f -p $PAR_PP_PROFILE -n 0 -r 1 --profile 2>&1 >/dev/null |
			grep -E "^profile|^  (kind|mv|mm|attn|to_f16|matrices)" | tee -a "$OUT/log.txt"
		[ -n "${PAR_B-1,8,16,64}" ] && env ${ev//,/ } $b/unicorn bench $f --parallel ${PAR_B:-1,8,16,64} -n ${PAR_GEN:-32} -r ${REPS:-2} \
			${PAR_PROFILE---profile} 2>"$OUT/prof-$tag-$shape.txt" | tee -a "$OUT/table.md"
		grep -E "^profile: parallel|^  (kind|mv|mm|attn|to_f16|matrices)" "$OUT/prof-$tag-$shape.txt" | tail -24 | tee -a "$OUT/log.txt"
	done
	done
	rm -f $f
done
