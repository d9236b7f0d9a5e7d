#version 450
// rope_kv with shared-memory tree reductions (portable)
#include "rope_kv.glsl"
