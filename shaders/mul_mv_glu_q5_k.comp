#version 450
// fused gate/up matrix-vector product with GELU-tanh, q5_k weights
#define TYPE TYPE_Q5_K
#define GLU 1
#include "mul_mv.glsl"
