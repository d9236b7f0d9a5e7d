#version 450
// tiled matrix-matrix product on matrix cores (prefill), q8_0 weights
#define TYPE TYPE_Q8_0
#include "mul_mm_cm.glsl"
