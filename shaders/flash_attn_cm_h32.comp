#version 450
// prefill attention on matrix cores (flash_attn_cm.glsl), head dimension 32
#define HD 32
#include "flash_attn_cm.glsl"
