#version 450
// batch fused gate/up matrix-vector product with GELU-tanh, bf16 weights
#define TYPE TYPE_BF16
#define GLU 1
#define MVS_BATCH 1
#include "mul_mvs.glsl"
