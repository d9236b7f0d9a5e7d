#version 450
// tiled matrix-matrix product on matrix cores (prefill), q6_k weights
#define TYPE TYPE_Q6_K
#include "mul_mm_cm.glsl"
