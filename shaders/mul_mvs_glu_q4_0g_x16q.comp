#version 450
// single-token fused gate/up matrix-vector product with GELU-tanh, q4_0 weights regrouped at upload against x as 16-bit integers, writing its output as x16 too for down's integer dot-product kernel (shaders/mul_mvs.glsl, FFN_X16)
#define TYPE TYPE_Q4_0G
#define X16 1
#define GLU 1
#define FFN_X16 1
#include "mul_mvs.glsl"
