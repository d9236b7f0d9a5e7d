#version 450
// embedding gather, q4_k weights
#define TYPE TYPE_Q4_K
#include "get_rows.glsl"
