#version 450
// embedding gather, q3_k weights
#define TYPE TYPE_Q3_K
#include "get_rows.glsl"
