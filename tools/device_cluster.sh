#!/bin/bash
# device_cluster.sh — the cluster on the GPU machine: fused vs split placement,
# 1 and 4 concurrent streams, per-worker busy shares and handoff cost (from the
# coordinator's report). Same carried folders as device_bench.sh; writes $OUT.
set -u
. tools/device_env.sh
export XDG_RUNTIME_DIR=/tmp/xdg
mkdir -p $XDG_RUNTIME_DIR && chmod 700 $XDG_RUNTIME_DIR
M=/tmp/models/${CLUSTER_MODEL:-1b}-q4_0.gguf
mkdir -p /tmp/models
[ -f $M ] || bin/unicorn-mkmodel --shape ${CLUSTER_MODEL:-1b} --type q4_0 --seed 1 -q -o $M
N=${CLUSTER_TOKENS:-64}
for placement in fused split; do
	log=$OUT/cluster-$placement.log
	bin/unicorn-up --model $M --placement $placement --name b$placement > $log 2>&1 &
	for i in $(seq 1 240); do grep -q 'unicorn: ready' $log && break; sleep 0.5; done
	for streams in 1 4; do
		t0=$(date +%s.%N)
		pids=()
		for s in $(seq 1 $streams); do
			bin/unicorn run --name b$placement --json --max-tokens $N --temp 0 "Stream $s: tell me a story" > $OUT/run-$placement-$streams-$s.json &
			pids+=($!)
		done
		wait "${pids[@]}"
		t1=$(date +%s.%N)
		echo "$placement streams=$streams tokens=$((N * streams)) wall_s=$(python3 -c "print(round($t1 - $t0, 3))")" | tee -a $OUT/cluster.txt
		sleep 1.5 # let the coordinator go idle and print its report
	done
	bin/unicorn status --name b$placement | tee -a $OUT/cluster.txt
	bin/unicorn down --name b$placement
	grep 'coordinator: \(fused\|split\):' $log | tee -a $OUT/cluster.txt
done
