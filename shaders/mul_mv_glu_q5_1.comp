#version 450
// fused gate/up matrix-vector product with GELU-tanh, q5_1 weights
#define TYPE TYPE_Q5_1
#define GLU 1
#include "mul_mv.glsl"
