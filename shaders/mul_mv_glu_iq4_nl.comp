#version 450
// fused gate/up matrix-vector product with GELU-tanh, iq4_nl weights
#define TYPE TYPE_IQ4_NL
#define GLU 1
#include "mul_mv.glsl"
