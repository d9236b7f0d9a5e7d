#version 450
// embedding gather, f32 weights
#define TYPE TYPE_F32
#include "get_rows.glsl"
