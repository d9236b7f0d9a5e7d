#version 450
// matrix-vector product, q2_k weights
#define TYPE TYPE_Q2_K
#include "mul_mv.glsl"
