#version 450
// tiled matrix-matrix product (prefill), q2_k weights
#define TYPE TYPE_Q2_K
#include "mul_mm.glsl"
