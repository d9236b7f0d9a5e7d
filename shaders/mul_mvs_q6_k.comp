#version 450
// single-token matrix-vector product, q6_k weights
#define TYPE TYPE_Q6_K
#include "mul_mvs.glsl"
