#version 450
// single-token matrix-vector product, f16 weights
#define TYPE TYPE_F16
#include "mul_mvs.glsl"
