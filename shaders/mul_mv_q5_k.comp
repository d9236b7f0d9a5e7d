#version 450
// matrix-vector product, q5_k weights
#define TYPE TYPE_Q5_K
#include "mul_mv.glsl"
