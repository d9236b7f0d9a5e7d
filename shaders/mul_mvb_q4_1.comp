#version 450
// batch (several token columns per workgroup) matrix-vector product, q4_1 weights
#define TYPE TYPE_Q4_1
#define MVS_BATCH 1
#include "mul_mvs.glsl"
