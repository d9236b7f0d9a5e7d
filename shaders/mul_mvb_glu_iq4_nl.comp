#version 450
// batch fused gate/up matrix-vector product with GELU-tanh, iq4_nl weights
#define TYPE TYPE_IQ4_NL
#define GLU 1
#define MVS_BATCH 1
#include "mul_mvs.glsl"
