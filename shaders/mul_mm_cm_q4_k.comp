#version 450
// tiled matrix-matrix product on matrix cores (prefill), q4_k weights
#define TYPE TYPE_Q4_K
#include "mul_mm_cm.glsl"
