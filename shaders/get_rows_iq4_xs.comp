#version 450
// embedding gather, iq4_xs weights
#define TYPE TYPE_IQ4_XS
#include "get_rows.glsl"
