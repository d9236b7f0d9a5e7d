#version 450
// matrix-matrix product on matrix cores (prefill), q5_0 weights, 128x128 tiles
#define TYPE TYPE_Q5_0
#include "mul_mm_cm.glsl"
