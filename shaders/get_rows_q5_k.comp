#version 450
// embedding gather, q5_k weights
#define TYPE TYPE_Q5_K
#include "get_rows.glsl"
