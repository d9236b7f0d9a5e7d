#version 450
// attn with shared-memory tree reductions (portable)
#include "attn.glsl"
