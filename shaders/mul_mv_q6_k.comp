#version 450
// matrix-vector product, q6_k weights
#define TYPE TYPE_Q6_K
#include "mul_mv.glsl"
