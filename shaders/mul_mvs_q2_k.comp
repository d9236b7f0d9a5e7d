#version 450
// single-token matrix-vector product, q2_k weights
#define TYPE TYPE_Q2_K
#include "mul_mvs.glsl"
