#version 450
// prefill attention on matrix cores (flash_attn_cm.glsl), head dimension 256
#define HD 256
#include "flash_attn_cm.glsl"
