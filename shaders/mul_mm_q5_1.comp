#version 450
// tiled matrix-matrix product (prefill), q5_1 weights
#define TYPE TYPE_Q5_1
#include "mul_mm.glsl"
