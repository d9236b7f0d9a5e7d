#version 450
// batch fused gate/up matrix-vector product with GELU-tanh, f16 weights
#define TYPE TYPE_F16
#define GLU 1
#define MVS_BATCH 1
#include "mul_mvs.glsl"
