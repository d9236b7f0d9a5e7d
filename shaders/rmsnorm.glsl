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
// elements per thread: the host passes PER >= n / WG
layout(constant_id = 1) const uint PER = 16;
// 1: the pipeline writes x16 copies (p.x16 may be 1); 0: kept[] shrinks to
// one element and p.x16 must be 0 (devices without the x16 kernels, or with
// little shared memory, pay nothing for it)
layout(constant_id = 2) const uint X16C = 0;

layout(binding = 0) readonly buffer XBuf { float x[]; };
layout(binding = 1) readonly buffer WBuf { float w[]; };
layout(binding = 2) buffer HBuf { float h[]; };
layout(binding = 3) readonly buffer W2Buf { float w2[]; };
layout(binding = 4) writeonly buffer O2Buf { float out2[]; };
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

// the row's result, kept for its x16 copy
#define X16_KEPT_ON X16C
#define X16_KEPT_LEN (WG * PER)
#define X16_OUT(w, v) xq[x16_base + (w)] = (v)
#include "x16_kept.glsl"

#define NORM_WG WG
#define NORM_PER PER
#define NORM_X(i) x[i]
#define NORM_W(i) w[i]
#define NORM_H(i) h[i]
#define NORM_H_SET(i, v) h[i] = (v)
#define NORM_W2(i) w2[i]
#define NORM_OUT2_SET(i, v) out2[i] = (v)
#include "norm_row.glsl"

void main()
{
	uint o = gl_WorkGroupID.x * p.n;
	norm_row(o, p.n, p.mode, p.eps);
	if (X16C == 0u || p.x16 == 0u || p.mode == 1u)
		return;
	barrier();
	x16_copy_row(o, p.n);
}
