#version 450
// tiled matrix-matrix product (prefill), q5_0 weights
#define TYPE TYPE_Q5_0
#include "mul_mm.glsl"
