#version 450
// single-token matrix-vector product, q4_1 weights
#define TYPE TYPE_Q4_1
#include "mul_mvs.glsl"
