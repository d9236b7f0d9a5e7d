#!/bin/bash
# device_struct_trace.sh — where a constrained 16-stream round's time goes
# (issue 31): one 1B Q4_0 cluster (--max-seqs 16), and for each request kind
# (plain, json_object, logit_bias) 16 streams of TOKENS tokens through
# tools/http_bench.py while `unicorn trace` records the coordinator's step
# spans; then per kind the medians of a full round's RUN span (send to DONE),
# the worker's own time in it (worker_us) and the coordinator's time between
# one span's DONE and the next send. Writes $OUT/trace-*.json, $OUT/tr-*.json
# and prints one table. Carried as device_structured.sh (bin/, .gl/, .devlibs/).
#   rm -rf bin && mv .devbin bin && bash tools/device_struct_trace.sh
# STRUCT_LOCAL=1: here, on lavapipe (with STRUCT_MODEL: a small model).
set -u
. tools/device_lib.sh
device_setup "${STRUCT_LOCAL:-}"
M=${STRUCT_MODEL:-/tmp/1b-q4_0.gguf}
[ -f "$M" ] || bin/unicorn-mkmodel --shape 1b --type q4_0 --seed 1 -q -o "$M" || exit 1
N=${TOKENS:-200}
bin/unicorn-up --model "$M" --max-seqs 16 --port 8650 --name tr -d > "$OUT/up-tr.txt" 2>&1 || { cat "$OUT/up-tr.txt"; exit 1; }
echo "| request | tok/s | ITL p50 ms | rounds of 16 | span p50 ms | worker p50 ms | messaging p50 ms | between spans p50 ms | round p50 ms |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for kind in plain json_object logit_bias; do
	case $kind in
	plain) extra= ;;
	json_object) extra='{"response_format":{"type":"json_object"}}' ;;
	logit_bias) extra='{"logit_bias":{"100":-100}}' ;;
	esac
	bin/unicorn trace --name tr --seconds "${TRACE_S:-4}" -o "$OUT/trace-$kind.json" 2>/dev/null &
	tp=$!
	sleep 0.5
	python3 tools/http_bench.py --url http://127.0.0.1:8650 --streams 16 --tokens "$N" --warmup 0 \
		--label "$kind" ${extra:+--extra "$extra"} --json "$OUT/tr-$kind.json" > /dev/null
	wait $tp
	python3 - "$OUT/trace-$kind.json" "$kind" "$OUT/tr-$kind.json" <<'PY'
import json, sys, statistics as st
b = json.load(open(sys.argv[3]))["levels"][0]
lab = f"{sys.argv[2]} | {b['tok_per_s']:.1f} | {b['itl_ms_p50']:.2f}"
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e.get("name", "").startswith("run")]
ev.sort(key=lambda e: e["ts"])
full = [i for i, e in enumerate(ev) if e["args"]["n"] == 16]
if not full:
    print(f"| {lab} | 0 | | | | | |"); sys.exit(0)
dur = [ev[i]["dur"] / 1e3 for i in full]
wk = [ev[i]["args"]["worker_us"] / 1e3 for i in full]
gap = [(ev[i + 1]["ts"] - ev[i]["ts"] - ev[i]["dur"]) / 1e3 for i in full if i + 1 < len(ev)]
rnd = [(ev[i + 1]["ts"] - ev[i]["ts"]) / 1e3 for i in full if i + 1 < len(ev)]
m = st.median
print(f"| {lab} | {len(full)} | {m(dur):.3f} | {m(wk):.3f} | {m(dur) - m(wk):.3f} | {m(gap):.3f} | {m(rnd):.3f} |")
PY
done
bin/unicorn logs --name tr > "$OUT/cluster-tr.log" 2>&1
bin/unicorn down --name tr
