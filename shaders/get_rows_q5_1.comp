#version 450
// embedding gather, q5_1 weights
#define TYPE TYPE_Q5_1
#include "get_rows.glsl"
