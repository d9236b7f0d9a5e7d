#version 450
// batch (several token columns per workgroup) matrix-vector product, q4_k weights
#define TYPE TYPE_Q4_K
#define MVS_BATCH 1
#include "mul_mvs.glsl"
