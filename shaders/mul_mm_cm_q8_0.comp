#version 450
// matrix-matrix product on matrix cores (prefill), q8_0 weights, 128x128 tiles
#define TYPE TYPE_Q8_0
#include "mul_mm_cm.glsl"
