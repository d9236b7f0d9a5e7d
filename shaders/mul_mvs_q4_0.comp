#version 450
// single-token matrix-vector product, q4_0 weights
#define TYPE TYPE_Q4_0
#include "mul_mvs.glsl"
