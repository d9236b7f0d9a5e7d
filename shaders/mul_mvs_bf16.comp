#version 450
// single-token matrix-vector product, bf16 weights
#define TYPE TYPE_BF16
#include "mul_mvs.glsl"
