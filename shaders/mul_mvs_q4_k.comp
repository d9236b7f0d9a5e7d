#version 450
// single-token matrix-vector product, q4_k weights
#define TYPE TYPE_Q4_K
#include "mul_mvs.glsl"
