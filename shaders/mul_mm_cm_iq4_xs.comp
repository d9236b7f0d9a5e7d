#version 450
// matrix-matrix product on matrix cores (prefill), iq4_xs weights, 128x128 tiles
#define TYPE TYPE_IQ4_XS
#include "mul_mm_cm.glsl"
