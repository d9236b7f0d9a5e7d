#version 450
// batch (several token columns per workgroup) matrix-vector product, q3_k weights
#define TYPE TYPE_Q3_K
#define MVS_BATCH 1
#include "mul_mvs.glsl"
