#!/bin/bash
# device_vision.sh — issue 33's figures on the GPU machine: Gemma 3's vision
# tower (gpu_worker/vision.c) on the 4B and 27B shapes. mkmodel writes each
# text model with --vision (a random-weight mmproj-*.gguf in llama.cpp's
# layout, f16 matrices as the published mmproj files), then
# unicorn-vision-bench times the upload and the encode of one image (896 px,
# 4,096 patches, 27 layers, 256 tokens). A tiny shape is checked against the
# CPU reference first, so a wrong tower on this GPU is not timed.
# Carried: bin/ (built with tools/device_prep.sh), .gl/, .devlibs/.
# Usage (from the repository root on the device):
#   rm -rf bin && mv .devbin bin && bash tools/device_vision.sh
# Writes $OUT/vision.txt. TTFT of an image + short prompt needs image tokens
# in the sequence (issue 33 step 4, not built yet): not measured here.
set -u
. tools/device_env.sh
ROOT=$(mktemp -d)
LOG=$OUT/vision.txt
status=0
{
	echo "== tiny: GPU vs CPU reference (matrix cores, then without)"
	bin/unicorn-mkmodel --shape tiny --layers 1 --vision --type f32 -q -o "$ROOT/tiny.gguf" &&
		bin/unicorn-vision-bench "$ROOT/mmproj-tiny.gguf" --check --reps 3 || status=1
	UNICORN_NO_COOPMAT=1 bin/unicorn-vision-bench "$ROOT/mmproj-tiny.gguf" --check --reps 3 || status=1
	for shape in ${SHAPES:-4b 27b}; do
		echo "== $shape (text layers 1: only the mmproj is timed)"
		# --layers 1: the text model is only there to name the projection width
		bin/unicorn-mkmodel --shape "$shape" --layers 1 --type q4_0 --vision -q -o "$ROOT/$shape.gguf" || { status=1; continue; }
		bin/unicorn-vision-bench "$ROOT/mmproj-$shape.gguf" --reps ${REPS:-10} || status=1
		echo "-- $shape without matrix cores"
		UNICORN_NO_COOPMAT=1 bin/unicorn-vision-bench "$ROOT/mmproj-$shape.gguf" --reps ${REPS:-10} || status=1
		rm -f "$ROOT/$shape.gguf" "$ROOT/mmproj-$shape.gguf"
	done
} 2>&1 | tee "$LOG"
rm -rf "$ROOT"
exit $status
