#version 450
// tiled matrix-matrix product on matrix cores (prefill), bf16 weights
#define TYPE TYPE_BF16
#include "mul_mm_cm.glsl"
