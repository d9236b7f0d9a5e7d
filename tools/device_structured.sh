#!/bin/bash
# device_structured.sh — what structured output costs (issue 31): ITL of
# streaming chat completions at 1 and 16 streams on mkmodel's 1B Q4_0,
# plain vs response_format json_schema (a free string: the widest masks) vs
# json_object vs logit_bias alone (the full logit row, no mask), through
# tools/http_bench.py. Writes $OUT/structured.md. Same carried folders as
# device_serving.sh (bin/ or BIN, .gl/, .devlibs/).
set -u
. tools/device_env.sh
export XDG_RUNTIME_DIR=/tmp/xdg
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
BIN=${BIN:-bin}
M=/tmp/1b-q4_0.gguf
[ -f "$M" ] || "$BIN"/unicorn-mkmodel --shape 1b --type q4_0 --seed 1 -q -o "$M" || exit 1
"$BIN"/unicorn-up --model "$M" --max-seqs 16 --port 8650 --name st -d > "$OUT/up.txt" 2>&1 || { cat "$OUT/up.txt"; exit 1; }
N=${TOKENS:-96}
run() { # label extra
	python3 tools/http_bench.py --url http://127.0.0.1:8650 --streams 1,16 --tokens "$N" \
		--label "$1" ${2:+--extra "$2"} --json "$OUT/$(echo "$1" | tr -c 'a-z0-9\n' _).json" >> "$OUT/structured.md"
}
run plain ""
run schema '{"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","properties":{"story":{"type":"string"}},"required":["story"],"additionalProperties":false}}}}'
run json_object '{"response_format":{"type":"json_object"}}'
run logit_bias '{"logit_bias":{"100":-100}}'
"$BIN"/unicorn logs --name st > "$OUT/cluster.log" 2>&1
"$BIN"/unicorn down --name st
cat "$OUT/structured.md"
