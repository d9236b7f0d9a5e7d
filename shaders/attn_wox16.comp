#version 450
// attn that also writes its output rows as x16 for wo (attn.glsl, WO_X16)
#define WO_X16 1
#include "attn.glsl"
