// rmsnorm.glsl (rmsnorm.comp, rmsnorm_sg.comp): per token row of n floats, one
// workgroup per row; the modes and the arithmetic are norm_row.glsl's.
#ifdef SG
// SG: reductions with subgroupAdd (one barrier instead of log2(WG)); the host
// uses this variant where subgroup arithmetic is supported (and the norm tail,
// which reduces the same way, only then: engine.c norm_tail_pick).
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#define NORM_SG 1
// the x16 copy's block maxima by shuffles (x16.glsl); the engine takes
// rmsnorm_sg only where mul_mvs runs, which needs shuffles too
#define X16_SG 1
#endif
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;
// elements per thread: the host passes PER >= n / WG (norm_row holds them
// in runs of four: ceil(PER / 4) runs)
layout(constant_id = 1) const uint PER = 16;
// 1: the pipeline writes x16 copies (p.x16 may be 1); 0: p.x16 must be 0
// (the tree variant's shared arrays for the copy shrink to one element)
layout(constant_id = 2) const uint X16C = 0;

layout(binding = 0) readonly buffer XBuf { float x[]; };
layout(binding = 1) readonly buffer WBuf { float w[]; };
layout(binding = 2) buffer HBuf { float h[]; };
layout(binding = 3) readonly buffer W2Buf { float w2[]; };
layout(binding = 4) writeonly buffer O2Buf { float out2[]; };
// the same as vec4s, for norm_row's loads and stores of whole runs
layout(binding = 0) readonly buffer XBuf4 { vec4 x4[]; };
layout(binding = 1) readonly buffer WBuf4 { vec4 w4[]; };
layout(binding = 2) buffer HBuf4 { vec4 h4[]; };
layout(binding = 3) readonly buffer W2Buf4 { vec4 w24[]; };
layout(binding = 4) writeonly buffer O2Buf4 { vec4 out24[]; };
// p.x16 = 1: the row's result also as x16 (x16.glsl), for the decode kernels
// that read it so (modes 0 and 3; n a multiple of X16_GROUP)
layout(binding = 5) writeonly buffer XQBuf { uint xq[]; };

// Mirrors struct norm_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint n;
	uint mode;
	float eps;
	uint x16;
} p;

// the x16 copy of the result, written by norm_row from its registers
#define NORM_X16_ON X16C
#define X16_OUT(w, v) xq[w] = (v)

#define NORM_WG WG
#define NORM_PER PER
#define NORM_X(i) x[i]
#define NORM_W(i) w[i]
#define NORM_H(i) h[i]
#define NORM_H_SET(i, v) h[i] = (v)
#define NORM_W2(i) w2[i]
#define NORM_OUT2_SET(i, v) out2[i] = (v)
#define NORM_X4(i) x4[i]
#define NORM_W4(i) w4[i]
#define NORM_H4(i) h4[i]
#define NORM_H4_SET(i, v) h4[i] = (v)
#define NORM_W24(i) w24[i]
#define NORM_OUT24_SET(i, v) out24[i] = (v)
#include "norm_row.glsl"

void main()
{
	norm_row(gl_WorkGroupID.x * p.n, p.n, p.mode, p.eps, X16C != 0u && p.x16 != 0u && p.mode != 1u);
}
