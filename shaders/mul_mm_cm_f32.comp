#version 450
// matrix-matrix product on matrix cores (prefill), f32 weights, 128x128 tiles
#define TYPE TYPE_F32
#include "mul_mm_cm.glsl"
