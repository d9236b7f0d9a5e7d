#version 450
// tiled matrix-matrix product (prefill), iq4_xs weights
#define TYPE TYPE_IQ4_XS
#include "mul_mm.glsl"
