#version 450
// tiled matrix-matrix product (prefill), q4_0 weights
#define TYPE TYPE_Q4_0
#include "mul_mm.glsl"
