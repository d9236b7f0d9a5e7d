#version 450
// single-token matrix-vector product, iq4_nl weights
#define TYPE TYPE_IQ4_NL
#include "mul_mvs.glsl"
