#version 450
// matrix-matrix product on matrix cores (prefill), q4_0 weights regrouped at upload (gpu_worker/regroup.h), 64x64 tiles
#define TYPE TYPE_Q4_0G
#define BM 64
#define BN 64
#define WM 32
#define WN 32
#include "mul_mm_cm.glsl"
