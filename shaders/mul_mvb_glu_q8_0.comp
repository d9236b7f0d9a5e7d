#version 450
// batch fused gate/up matrix-vector product with GELU-tanh, q8_0 weights
#define TYPE TYPE_Q8_0
#define GLU 1
#define MVS_BATCH 1
#include "mul_mvs.glsl"
