#version 450
// embedding gather, iq4_nl weights
#define TYPE TYPE_IQ4_NL
#include "get_rows.glsl"
