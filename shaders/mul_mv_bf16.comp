#version 450
// matrix-vector product, bf16 weights
#define TYPE TYPE_BF16
#include "mul_mv.glsl"
