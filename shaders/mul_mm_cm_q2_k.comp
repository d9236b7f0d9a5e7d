#version 450
// matrix-matrix product on matrix cores (prefill), q2_k weights, 128x128 tiles
#define TYPE TYPE_Q2_K
#include "mul_mm_cm.glsl"
