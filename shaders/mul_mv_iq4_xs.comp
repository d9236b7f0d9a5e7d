#version 450
// matrix-vector product, iq4_xs weights
#define TYPE TYPE_IQ4_XS
#include "mul_mv.glsl"
