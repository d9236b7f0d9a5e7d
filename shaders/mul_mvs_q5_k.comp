#version 450
// single-token matrix-vector product, q5_k weights
#define TYPE TYPE_Q5_K
#include "mul_mvs.glsl"
