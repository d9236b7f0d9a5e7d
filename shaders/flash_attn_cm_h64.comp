#version 450
// prefill attention on matrix cores (flash_attn_cm.glsl), head dimension 64
#define HD 64
#include "flash_attn_cm.glsl"
