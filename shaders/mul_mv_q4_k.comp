#version 450
// matrix-vector product, q4_k weights
#define TYPE TYPE_Q4_K
#include "mul_mv.glsl"
