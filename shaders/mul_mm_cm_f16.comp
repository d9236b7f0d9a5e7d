#version 450
// tiled matrix-matrix product on matrix cores (prefill), f16 weights
#define TYPE TYPE_F16
#include "mul_mm_cm.glsl"
