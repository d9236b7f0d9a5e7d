#version 450
// fused gate/up matrix-vector product with GELU-tanh, q2_k weights
#define TYPE TYPE_Q2_K
#define GLU 1
#include "mul_mv.glsl"
