#version 450
// single-token fused gate/up matrix-vector product with GELU-tanh, q4_1 weights
#define TYPE TYPE_Q4_1
#define GLU 1
#include "mul_mvs.glsl"
