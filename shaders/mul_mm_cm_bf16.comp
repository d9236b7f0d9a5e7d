#version 450
// matrix-matrix product on matrix cores (prefill), bf16 weights, 128x128 tiles
#define TYPE TYPE_BF16
#include "mul_mm_cm.glsl"
