#version 450
// matrix-matrix product on matrix cores (prefill), q5_1 weights, 128x128 tiles
#define TYPE TYPE_Q5_1
#include "mul_mm_cm.glsl"
