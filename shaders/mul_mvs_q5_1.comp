#version 450
// single-token matrix-vector product, q5_1 weights
#define TYPE TYPE_Q5_1
#include "mul_mvs.glsl"
