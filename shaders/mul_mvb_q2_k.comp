#version 450
// batch (several token columns per workgroup) matrix-vector product, q2_k weights
#define TYPE TYPE_Q2_K
#define MVS_BATCH 1
#include "mul_mvs.glsl"
