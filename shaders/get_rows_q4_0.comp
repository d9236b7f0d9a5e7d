#version 450
// embedding gather, q4_0 weights
#define TYPE TYPE_Q4_0
#include "get_rows.glsl"
