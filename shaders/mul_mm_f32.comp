#version 450
// tiled matrix-matrix product (prefill), f32 weights
#define TYPE TYPE_F32
#include "mul_mm.glsl"
