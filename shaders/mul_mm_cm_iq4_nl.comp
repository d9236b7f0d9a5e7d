#version 450
// matrix-matrix product on matrix cores (prefill), iq4_nl weights, 128x128 tiles
#define TYPE TYPE_IQ4_NL
#include "mul_mm_cm.glsl"
