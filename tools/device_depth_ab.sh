#!/bin/bash
# device_depth_ab.sh — decode at depth under several engine settings, same
# run, same file (issue 30's 27B tg128 @ d8192 against llama.cpp's 67.0):
# for each environment of DEPTH_ENVS (assignments joined by commas, "-" for
# none) `unicorn bench MODEL -p 0 -n 128 -d DEPTHS -r REPS --json`, then one
# `--profile` decode step at the deepest depth for the first and for
# DEPTH_PROFILE_ENV (if set). Prints one table.
#   DEPTH_SHAPE [27b]  mkmodel shape (Q4_0, seed 1), written once to /tmp/models
#   DEPTHS [0,8192]    DEPTH_ENVS ["- UNICORN_VK_ATTN_SPLITS=32 UNICORN_VK_ATTN_SPLITS=64"]
#   REPS [1]           DEPTH_LOCAL=1: not on the device (no tools/device_env.sh)
# Carried as device_bench.sh (bin/ from .devbin, .gl/, .devlibs/).
set -u
. tools/device_lib.sh
device_setup "${DEPTH_LOCAL:-}"
SHAPE=${DEPTH_SHAPE:-27b}
M=/tmp/models/$SHAPE-q4_0.gguf
mkdir -p /tmp/models
[ -s "$M" ] || bin/unicorn-mkmodel --shape "$SHAPE" --type q4_0 --seed 1 -q -o "$M" || exit 1
status=0
for env in ${DEPTH_ENVS:-- UNICORN_VK_ATTN_SPLITS=32 UNICORN_VK_ATTN_SPLITS=64}; do
	label=${env//,/ }
	[ "$env" = - ] && env= && label=default
	f=$OUT/depth-$(echo "$label" | tr -c 'A-Za-z0-9\n' _).json
	env ${env//,/ } bin/unicorn bench "$M" -p 0 -n 128 -d "${DEPTHS:-0,8192}" -r "${REPS:-1}" --json > "$f" 2>/dev/null || status=1
	python3 - "$f" "$label" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"| {sys.argv[2]} | no JSON ({e}) |"); sys.exit(0)
print(f"| {sys.argv[2]} | " + " | ".join(f"{r.get('test')}: {r.get('avg_ts', 0):.2f}" for r in j.get("tests", [])) + " |")
PY
done
deep=${DEPTHS:-0,8192}
deep=${deep##*,}
for env in - ${DEPTH_PROFILE_ENV:-}; do
	[ "$env" = - ] && env=
	echo "== profile ${env:-default} (decode step at depth $deep)"
	env ${env//,/ } bin/unicorn bench "$M" -p 0 -n 128 -d "$deep" -r 1 --profile 2>&1 >/dev/null |
		grep -A40 'profile: decode step' | tail -n +1 | head -40
done
exit $status
