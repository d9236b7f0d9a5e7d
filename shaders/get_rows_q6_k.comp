#version 450
// embedding gather, q6_k weights
#define TYPE TYPE_Q6_K
#include "get_rows.glsl"
