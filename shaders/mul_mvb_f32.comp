#version 450
// batch (several token columns per workgroup) matrix-vector product, f32 weights
#define TYPE TYPE_F32
#define MVS_BATCH 1
#include "mul_mvs.glsl"
