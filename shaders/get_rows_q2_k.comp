#version 450
// embedding gather, q2_k weights
#define TYPE TYPE_Q2_K
#include "get_rows.glsl"
