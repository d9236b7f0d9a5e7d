#version 450
// batch fused gate/up matrix-vector product with GELU-tanh, f32 weights
#define TYPE TYPE_F32
#define GLU 1
#define MVS_BATCH 1
#include "mul_mvs.glsl"
