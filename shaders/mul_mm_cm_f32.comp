#version 450
// tiled matrix-matrix product on matrix cores (prefill), f32 weights
#define TYPE TYPE_F32
#include "mul_mm_cm.glsl"
