#version 450
// batch (several token columns per workgroup) matrix-vector product, q5_0 weights
#define TYPE TYPE_Q5_0
#define MVS_BATCH 1
#include "mul_mvs.glsl"
