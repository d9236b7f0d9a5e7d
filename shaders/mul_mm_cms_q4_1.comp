#version 450
// matrix-matrix product on matrix cores (prefill), q4_1 weights, 64x64 tiles
#define TYPE TYPE_Q4_1
#define BM 64
#define BN 64
#define WM 32
#define WN 32
#include "mul_mm_cm.glsl"
