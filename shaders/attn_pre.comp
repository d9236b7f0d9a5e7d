#version 450
// attn for steps whose rope_kv ran before (prefill chunks): no rope code
#define ATTN_PREFILL 1
#include "attn.glsl"
