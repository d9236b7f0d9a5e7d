#version 450
// embedding gather, q8_0 weights
#define TYPE TYPE_Q8_0
#include "get_rows.glsl"
