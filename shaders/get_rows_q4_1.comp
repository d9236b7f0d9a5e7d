#version 450
// embedding gather, q4_1 weights
#define TYPE TYPE_Q4_1
#include "get_rows.glsl"
