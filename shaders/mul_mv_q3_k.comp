#version 450
// matrix-vector product, q3_k weights
#define TYPE TYPE_Q3_K
#include "mul_mv.glsl"
