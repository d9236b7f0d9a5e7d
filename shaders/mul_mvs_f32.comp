#version 450
// single-token matrix-vector product, f32 weights
#define TYPE TYPE_F32
#include "mul_mvs.glsl"
