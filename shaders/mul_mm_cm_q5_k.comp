#version 450
// matrix-matrix product on matrix cores (prefill), q5_k weights, 128x128 tiles
#define TYPE TYPE_Q5_K
#include "mul_mm_cm.glsl"
