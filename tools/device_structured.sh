#!/bin/bash
# device_structured.sh — what structured output costs (issue 31): ITL of
# streaming chat completions at 1 and 16 streams on mkmodel's 1B Q4_0,
# through tools/http_bench.py, for
#   plain; response_format json_schema (a free string: the widest masks);
#   json_object; logit_bias alone; a named tool (its call streamed as
#   argument deltas, which http_bench counts as arrivals) — the constrained
#   ones on the GPU top-k (the schema's mask and the biases applied by
#   shaders/topk.comp, MSG_CHUNK_HEAD_BIAS: no logit row leaves the GPU);
# then the cluster again with UNICORN_FULL_ROW=1: json_schema, json_object and
# logit_bias from the full logit row (the path before, for A/B on the same
# card); and,
# with STRUCT_SPLIT=1, json_schema and logit_bias on --placement split (the
# full row through MSG_HEAD_FULL).
# Writes $OUT/structured.md (one table per run) and the cluster logs. Same
# carried folders as device_serving.sh (bin/ or BIN, .gl/, .devlibs/).
#
# Usage (repository root, on the device, after tools/device_prep.sh here):
#   rm -rf bin && mv .devbin bin && bash tools/device_structured.sh
# Environment: TOKENS [96] max_tokens per stream; STRUCT_SPLIT [0]; STRUCT_FULL_ROW [1]
# (0: no UNICORN_FULL_ROW=1 cluster); STRUCT_MODEL
# (a GGUF instead of mkmodel's 1B).
set -u
. tools/device_env.sh
export XDG_RUNTIME_DIR=/tmp/xdg
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
BIN=${BIN:-bin}
M=${STRUCT_MODEL:-/tmp/1b-q4_0.gguf}
[ -f "$M" ] || "$BIN"/unicorn-mkmodel --shape 1b --type q4_0 --seed 1 -q -o "$M" || exit 1
N=${TOKENS:-96}
up() { # name [unicorn-up options]
	local n=$1
	shift
	rm -rf "${XDG_RUNTIME_DIR:?}/unicorn/$n" # a fresh log (paths.txt counts its lines)
	"$BIN"/unicorn-up --model "$M" --max-seqs 16 --port 8650 --name "$n" -d "$@" > "$OUT/up-$n.txt" 2>&1 ||
		{ cat "$OUT/up-$n.txt"; exit 1; }
}
down() { # name
	"$BIN"/unicorn logs --name "$1" > "$OUT/cluster-$1.log" 2>&1
	"$BIN"/unicorn down --name "$1"
}
run() { # label extra
	python3 tools/http_bench.py --url http://127.0.0.1:8650 --streams 1,16 --tokens "$N" \
		--label "$1" ${2:+--extra "$2"} --json "$OUT/$(echo "$1" | tr -c 'a-z0-9\n' _).json" >> "$OUT/structured.md"
}
SCHEMA='{"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","properties":{"story":{"type":"string"}},"required":["story"],"additionalProperties":false}}}}'
BIAS='{"logit_bias":{"100":-100}}'
TOOLS='{"tools":[{"type":"function","function":{"name":"write","parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}}],"tool_choice":{"type":"function","function":{"name":"write"}}}'
up st
run plain ""
run schema "$SCHEMA"
run json_object '{"response_format":{"type":"json_object"}}'
run logit_bias "$BIAS"
run tools_named "$TOOLS"
down st
if [ "${STRUCT_FULL_ROW:-1}" = 1 ]; then
	UNICORN_FULL_ROW=1 up stc
	run schema_full_row "$SCHEMA"
	run json_object_full_row '{"response_format":{"type":"json_object"}}'
	run logit_bias_full_row "$BIAS"
	down stc
fi
if [ "${STRUCT_SPLIT:-0}" = 1 ]; then
	up sts --placement split
	run split_plain ""
	run split_schema "$SCHEMA"
	run split_logit_bias "$BIAS"
	down sts
fi
# which path each cluster's requests took (the coordinator logs it per request)
for l in "$OUT"/cluster-*.log; do
	echo "$(basename "$l"): $(grep -c 'on the GPU top-k' "$l") on the GPU top-k, $(grep -c 'full logit row' "$l") full row"
done | tee "$OUT/paths.txt" >> "$OUT/structured.md"
cat "$OUT/structured.md"
