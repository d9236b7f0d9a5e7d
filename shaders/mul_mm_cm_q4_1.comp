#version 450
// matrix-matrix product on matrix cores (prefill), q4_1 weights, 128x128 tiles
#define TYPE TYPE_Q4_1
#include "mul_mm_cm.glsl"
