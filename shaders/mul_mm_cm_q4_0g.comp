#version 450
// matrix-matrix product on matrix cores (prefill), q4_0 weights regrouped at upload (gpu_worker/regroup.h), 128x128 tiles
#define TYPE TYPE_Q4_0G
#include "mul_mm_cm.glsl"
