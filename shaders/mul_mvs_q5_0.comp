#version 450
// single-token matrix-vector product, q5_0 weights
#define TYPE TYPE_Q5_0
#include "mul_mvs.glsl"
