#version 450
// prefill attention on matrix cores (flash_attn_cm.glsl), head dimension 128
#define HD 128
#include "flash_attn_cm.glsl"
