#version 450
// matrix-vector product, q5_0 weights
#define TYPE TYPE_Q5_0
#include "mul_mv.glsl"
