#version 450
// matrix-vector product, f16 weights
#define TYPE TYPE_F16
#include "mul_mv.glsl"
