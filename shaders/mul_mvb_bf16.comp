#version 450
// batch (several token columns per workgroup) matrix-vector product, bf16 weights
#define TYPE TYPE_BF16
#define MVS_BATCH 1
#include "mul_mvs.glsl"
