#version 450
// tiled matrix-matrix product on matrix cores (prefill), q4_0 weights
#define TYPE TYPE_Q4_0
#include "mul_mm_cm.glsl"
