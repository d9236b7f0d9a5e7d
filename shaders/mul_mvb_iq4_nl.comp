#version 450
// batch (several token columns per workgroup) matrix-vector product, iq4_nl weights
#define TYPE TYPE_IQ4_NL
#define MVS_BATCH 1
#include "mul_mvs.glsl"
