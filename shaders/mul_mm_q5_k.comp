#version 450
// tiled matrix-matrix product (prefill), q5_k weights
#define TYPE TYPE_Q5_K
#include "mul_mm.glsl"
