#version 450
// single-token matrix-vector product, q8_0 weights
#define TYPE TYPE_Q8_0
#include "mul_mvs.glsl"
