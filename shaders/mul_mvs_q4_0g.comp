#version 450
// single-token matrix-vector product, q4_0 weights regrouped at upload (gpu_worker/regroup.h)
#define TYPE TYPE_Q4_0G
#include "mul_mvs.glsl"
