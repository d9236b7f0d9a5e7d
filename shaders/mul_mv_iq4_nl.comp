#version 450
// matrix-vector product, iq4_nl weights
#define TYPE TYPE_IQ4_NL
#include "mul_mv.glsl"
