#version 450
// attn with subgroup reductions, for steps whose rope_kv ran before (prefill chunks): no rope code
#define SG 1
#define ATTN_PREFILL 1
#include "attn.glsl"
