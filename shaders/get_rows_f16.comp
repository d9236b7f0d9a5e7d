#version 450
// embedding gather, f16 weights
#define TYPE TYPE_F16
#include "get_rows.glsl"
