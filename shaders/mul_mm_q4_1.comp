#version 450
// tiled matrix-matrix product (prefill), q4_1 weights
#define TYPE TYPE_Q4_1
#include "mul_mm.glsl"
