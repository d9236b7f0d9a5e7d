#version 450
// matrix-vector product, q5_1 weights
#define TYPE TYPE_Q5_1
#include "mul_mv.glsl"
