#version 450
// attn with subgroup reductions
#define SG 1
#include "attn.glsl"
