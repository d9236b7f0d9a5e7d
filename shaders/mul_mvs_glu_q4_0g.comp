#version 450
// single-token fused gate/up matrix-vector product with GELU-tanh, q4_0 weights regrouped at upload (gpu_worker/regroup.h)
#define TYPE TYPE_Q4_0G
#define GLU 1
#include "mul_mvs.glsl"
