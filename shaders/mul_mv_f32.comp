#version 450
// matrix-vector product, f32 weights
#define TYPE TYPE_F32
#include "mul_mv.glsl"
