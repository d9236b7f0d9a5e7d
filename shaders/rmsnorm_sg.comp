#version 450
// rmsnorm with subgroup reductions
#define SG 1
#include "rmsnorm.glsl"
