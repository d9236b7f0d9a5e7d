#version 450
// batch fused gate/up matrix-vector product with GELU-tanh, q3_k weights
#define TYPE TYPE_Q3_K
#define GLU 1
#define MVS_BATCH 1
#include "mul_mvs.glsl"
