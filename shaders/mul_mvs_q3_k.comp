#version 450
// single-token matrix-vector product, q3_k weights
#define TYPE TYPE_Q3_K
#include "mul_mvs.glsl"
