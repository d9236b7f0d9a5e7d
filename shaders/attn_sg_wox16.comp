#version 450
// attn with subgroup reductions that also writes its output rows as x16 for wo (attn.glsl, WO_X16)
#define SG 1
#define WO_X16 1
#include "attn.glsl"
