#version 450
// embedding gather, q5_0 weights
#define TYPE TYPE_Q5_0
#include "get_rows.glsl"
