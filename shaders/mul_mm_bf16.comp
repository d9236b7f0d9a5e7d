#version 450
// tiled matrix-matrix product (prefill), bf16 weights
#define TYPE TYPE_BF16
#include "mul_mm.glsl"
