#version 450
// embedding gather, bf16 weights
#define TYPE TYPE_BF16
#include "get_rows.glsl"
