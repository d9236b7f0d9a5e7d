#version 450
// rope_kv with subgroup reductions
#define SG 1
#include "rope_kv.glsl"
