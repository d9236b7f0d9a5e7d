#version 450
// embedding gather, q4_0 weights regrouped at upload (gpu_worker/regroup.h)
#define TYPE TYPE_Q4_0G
#include "get_rows.glsl"
