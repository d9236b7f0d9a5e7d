#version 450
// matrix-vector product, q4_1 weights
#define TYPE TYPE_Q4_1
#include "mul_mv.glsl"
