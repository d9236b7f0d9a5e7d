#version 450
// rmsnorm with shared-memory tree reductions (portable)
#include "rmsnorm.glsl"
