#version 450
// tiled matrix-matrix product (prefill), iq4_nl weights
#define TYPE TYPE_IQ4_NL
#include "mul_mm.glsl"
