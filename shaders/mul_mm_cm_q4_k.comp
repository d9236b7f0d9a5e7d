#version 450
// matrix-matrix product on matrix cores (prefill), q4_k weights, 128x128 tiles
#define TYPE TYPE_Q4_K
#include "mul_mm_cm.glsl"
