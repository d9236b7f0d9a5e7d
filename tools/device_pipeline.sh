#!/bin/bash
# device_pipeline.sh — issue 32 on the two-GPU machine (nvidia-h100-x2 /
# nvidia-h200-x2), in one call: for each model (mkmodel's 27b and 1b, Q4_0)
# start
#   fused:    unicorn-up --placement fused --vk-device 0
#   pipeline: unicorn-up --devices 0,1            (auto = pipeline, stages gpu0/gpu1)
# with --max-seqs 64, wait for ready, and measure through the OpenAI API
# (tools/http_bench.py, streaming chat completions, temperature 0) at 1, 16
# and 64 streams of 128 tokens, one level at a time; around each level the
# coordinator's /metrics give each worker's busy share of that level's wall
# time (unicorn_worker_busy_seconds_total: its device's own time). Then
# `unicorn down`. Prints and writes to $OUT:
#   pipeline.md            one table: model, placement, streams, tok/s, TTFT and ITL
#                          p50/p99, each worker's busy share, and pipeline/fused
#   pipeline-M-P.log       each cluster's log (its `coordinator: pipeline:` lines,
#                          the stages' layer ranges and memory)
#   pipeline-M-P-S.json    http_bench's record of each level
#   status-M-P.txt         `unicorn status` after the run (BUSY, WEIGHTS, KV per stage)
# Carried as device_serving.sh (bin/, .gl/, .devlibs/: tools/device_prep.sh first).
#
# Usage (repository root, on the device):
#   rm -rf bin && mv .devbin bin && bash tools/device_pipeline.sh
# Environment (defaults in brackets):
#   PIPE_MODELS ["27b 1b"]     mkmodel shapes (Q4_0, seed 1), written to /tmp/models once
#   PIPE_STREAMS [1,16,64]     concurrency levels
#   PIPE_TOKENS [128]          max_tokens per stream
#   PIPE_DEVICES [0,1]         the pipeline's devices; fused runs on the first
#   PIPE_CTX [4096]            --ctx (a shorter context: the KV cache is planned and
#                              zeroed faster; 64 streams x 128 tokens need far less)
#   PIPE_BUDGET_S [560]        stop starting new work after this many seconds (the
#                              device call's limit is 600): what ran is still reported
#   PIPE_UP_ARGS               more unicorn-up options (both placements)
#   PIPE_PLACEMENTS ["fused pipeline"]  which placements, in this order
#   PIPE_PORT [8660]           HTTP port
#   BIN [bin]
#   PIPE_LOCAL=1               not on the device (no tools/device_env.sh), e.g. on lavapipe:
#     PIPE_LOCAL=1 PIPE_MODELS=tiny PIPE_STREAMS=1,4 PIPE_TOKENS=16 PIPE_DEVICES=0,0 \
#       OUT=/tmp/pp tools/device_pipeline.sh
# Exit status: 0 when every cluster came up and every request succeeded.
set -u
. tools/device_lib.sh
device_setup "${PIPE_LOCAL:-}"
BIN=${BIN:-bin}
PORT=${PIPE_PORT:-8660}
STREAMS=${PIPE_STREAMS:-1,16,64}
N=${PIPE_TOKENS:-128}
DEVICES=${PIPE_DEVICES:-0,1}
FUSED_DEV=${DEVICES%%,*}
CTX=${PIPE_CTX:-4096}
T_END=$(($(date +%s) + ${PIPE_BUDGET_S:-560}))
URL=http://127.0.0.1:$PORT
status=0

# worker busy seconds from /metrics: "name seconds" lines
busy_snapshot() {
	python3 - "$URL" <<'EOF'
import re, sys, urllib.request
try:
    t = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=5).read().decode()
except Exception:
    sys.exit(0)
for m in re.finditer(r'^unicorn_worker_busy_seconds_total\{worker="([^"]+)"\} ([0-9.eE+-]+)$', t, re.M):
    print(m.group(1), m.group(2))
EOF
}

# "gpu0 81% gpu1 79%": each worker's busy seconds between two snapshots over wall seconds
busy_share() { # before-file after-file wall_s
	python3 - "$1" "$2" "$3" <<'EOF'
import sys
def load(p):
    d = {}
    for line in open(p):
        k, v = line.split()
        d[k] = float(v)
    return d
a, b, wall = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
print(" ".join("%s %.0f%%" % (k, 100 * (b[k] - a.get(k, 0)) / wall) for k in sorted(b)) if wall > 0 else "-")
EOF
}

# Where one stream's step goes: the coordinator's /trace spans (each op's wall
# time as the workers measured it, coordinator/stages.c) of the one-stream
# level, averaged per (worker, op), and the step's time not inside any op
# (hand-offs between stages, the coordinator's sampling and posting)
trace_summary() { # trace.json label
	python3 - "$1" "$2" <<'EOF'
import json, re, sys
from collections import defaultdict
try:
    events = json.load(open(sys.argv[1]))["traceEvents"]
except Exception as x:
    print("trace %s: unreadable (%s)" % (sys.argv[2], x)); sys.exit(0)
names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
# decode steps (one token), not prefill
ev = [e for e in events if e.get("ph") == "X" and e["args"].get("n", 0) == 1]
if not ev:
    print("trace %s: no one-token spans" % sys.argv[2]); sys.exit(0)
g = defaultdict(list)
for e in ev:
    g[(names.get(e["tid"], e["tid"]), re.sub(r"L\d+", "L*", e["name"]))].append(e["dur"])
steps = min(len(v) for v in g.values())
span = (max(e["ts"] + e["dur"] for e in ev) - min(e["ts"] for e in ev)) / steps
inside = sum(sum(v) for v in g.values()) / steps
print("trace %s: %d steps, %.0f us per step, %.0f us inside ops, %.0f us between" % (sys.argv[2], steps, span, inside, span - inside))
for k in sorted(g):
    v = sorted(g[k])
    print("  %-10s %-10s n %5d  mean %8.1f us  p50 %8.1f us" % (k[0], k[1], len(v), sum(v) / len(v), v[len(v) // 2]))
EOF
}

cat > "$OUT/pipeline.md" <<EOF
| model | placement | streams | tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | busy (device time / wall) | vs fused |
|---|---|---:|---:|---:|---:|---|---:|
EOF
declare -A FUSED_TPS

for shape in ${PIPE_MODELS:-27b 1b}; do
	M=/tmp/models/$shape-q4_0.gguf
	mkdir -p /tmp/models
	if [ ! -f "$M" ]; then
		t0=$(date +%s.%N)
		"$BIN"/unicorn-mkmodel --shape "$shape" --type q4_0 --seed 1 -q -o "$M" || { status=1; continue; }
		echo "device_pipeline: mkmodel $shape q4_0: $(python3 -c "print('%.1f' % ($(date +%s.%N) - $t0))") s" | tee -a "$OUT/pipeline.log"
	fi
	for placement in ${PIPE_PLACEMENTS:-fused pipeline}; do
		if [ "$(date +%s)" -ge "$T_END" ]; then
			echo "device_pipeline: out of time before $shape $placement" | tee -a "$OUT/pipeline.md"
			status=1
			continue
		fi
		name=p$placement
		log=$OUT/pipeline-$shape-$placement.log
		if [ "$placement" = fused ]; then
			args="--placement fused --vk-device $FUSED_DEV"
		else
			args="--devices $DEVICES"
		fi
		t0=$(date +%s.%N)
		"$BIN"/unicorn-up --model "$M" $args --max-seqs 64 --ctx "$CTX" --name "$name" --port "$PORT" \
			${PIPE_UP_ARGS:-} > "$log" 2>&1 &
		up=$!
		if ! cluster_wait_ready "$URL" $up "$T_END"; then
			echo "device_pipeline: $shape $placement: the cluster did not become ready (log $log):" >&2
			tail -20 "$log" >&2
			"$BIN"/unicorn down --name "$name" > /dev/null 2>&1
			wait $up 2>/dev/null
			status=1
			continue
		fi
		echo "device_pipeline: $shape $placement ready in $(python3 -c "print('%.1f' % ($(date +%s.%N) - $t0))") s" | tee -a "$OUT/pipeline.log"
		grep -h "pipeline: stages\|device-mem\|layers .* on " "$log" | head -4 | tee -a "$OUT/pipeline.log"
		# one short request first: pipelines recorded, clocks up
		python3 tools/http_bench.py --url "$URL" --streams 1 --tokens 8 --warmup 0 > /dev/null 2>&1
		for s in ${STREAMS//,/ }; do
			if [ "$(date +%s)" -ge "$T_END" ]; then
				echo "device_pipeline: out of time before $shape $placement $s streams" | tee -a "$OUT/pipeline.md"
				status=1
				break
			fi
			j=$OUT/pipeline-$shape-$placement-$s.json
			busy_snapshot > "$OUT/.busy0"
			tr=
			if [ "$s" = 1 ]; then # one stream: the step's breakdown from 2 s of trace
				tr=$OUT/.trace.json
				env -u LD_LIBRARY_PATH curl -s -m 10 "$URL/trace?seconds=2" -o "$tr" &
			fi
			python3 tools/http_bench.py --url "$URL" --streams "$s" --tokens "$N" --warmup 0 \
				--label "$shape $placement" --json "$j" > /dev/null || status=1
			busy_snapshot > "$OUT/.busy1"
			if [ -n "$tr" ]; then
				wait $!
				trace_summary "$tr" "$shape $placement" >> "$OUT/pipeline.log"
				[ -n "${PIPE_KEEP_TRACE:-}" ] && cp "$tr" "$OUT/trace-$shape-$placement.json"
				rm -f "$tr"
			fi
			row=$(python3 - "$j" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["levels"][0]
f = lambda x: "-" if x is None else "%.1f" % x
print(r["tok_per_s"], r["wall_s"], "%s / %s" % (f(r["ttft_ms_p50"]), f(r["ttft_ms_p99"])),
      "%s / %s" % (f(r["itl_ms_p50"]), f(r["itl_ms_p99"])), r["errors"], sep="\t")
EOF
)
			IFS=$'\t' read -r tps wall ttft itl errs <<< "$row"
			[ "$errs" = 0 ] || status=1
			busy=$(busy_share "$OUT/.busy0" "$OUT/.busy1" "$wall")
			key=$shape-$s
			ratio=-
			if [ "$placement" = fused ]; then
				FUSED_TPS[$key]=$tps
			elif [ -n "${FUSED_TPS[$key]:-}" ]; then
				ratio=$(python3 -c "print('%.2fx' % ($tps / ${FUSED_TPS[$key]}))")
			fi
			echo "| $shape Q4_0 | $placement | $s | $tps | $ttft | $itl | $busy | $ratio |" | tee -a "$OUT/pipeline.md"
		done
		sleep 1.5 # the coordinator goes idle and prints its per-worker report
		"$BIN"/unicorn status --name "$name" > "$OUT/status-$shape-$placement.txt" 2>&1
		"$BIN"/unicorn down --name "$name" > /dev/null 2>&1 || status=1
		wait $up 2>/dev/null
		grep -h 'coordinator: \(fused\|pipeline\):' "$log" | tail -2 >> "$OUT/pipeline.log"
	done
done
rm -f "$OUT/.busy0" "$OUT/.busy1"
echo
cat "$OUT/pipeline.md"
echo
cat "$OUT/pipeline.log"
for f in "$OUT"/status-*.txt; do
	[ -f "$f" ] && { echo "== $f"; grep -E "ROLE|gpu" "$f"; }
done
exit $status
