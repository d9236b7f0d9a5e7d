#version 450
// matrix-vector product, q4_0 weights
#define TYPE TYPE_Q4_0
#include "mul_mv.glsl"
