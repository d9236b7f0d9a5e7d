#version 450
// batch (several token columns per workgroup) matrix-vector product, q4_0 weights regrouped at upload (gpu_worker/regroup.h)
#define TYPE TYPE_Q4_0G
#define MVS_BATCH 1
#include "mul_mvs.glsl"
