#version 450
// tiled matrix-matrix product (prefill), q3_k weights
#define TYPE TYPE_Q3_K
#include "mul_mm.glsl"
