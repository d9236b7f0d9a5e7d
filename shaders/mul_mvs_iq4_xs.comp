#version 450
// single-token matrix-vector product, iq4_xs weights
#define TYPE TYPE_IQ4_XS
#include "mul_mvs.glsl"
