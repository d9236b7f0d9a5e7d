#version 450
// matrix-matrix product on matrix cores (prefill), q3_k weights, 128x128 tiles
#define TYPE TYPE_Q3_K
#include "mul_mm_cm.glsl"
