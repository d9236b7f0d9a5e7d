#version 450
// tiled matrix-matrix product (prefill), f16 weights
#define TYPE TYPE_F16
#include "mul_mm.glsl"
