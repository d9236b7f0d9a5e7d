#version 450
// batch (several token columns per workgroup) matrix-vector product, q8_0 weights
#define TYPE TYPE_Q8_0
#define MVS_BATCH 1
#include "mul_mvs.glsl"
