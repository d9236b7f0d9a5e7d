// rmsnorm.glsl (rmsnorm.comp, rmsnorm_sg.comp): per token row of n floats.
//   mode 0: h = norm(x) * w
//   mode 1: h += norm(x) * w                     (post-norm + residual add)
//   mode 3: h += norm(x) * w; out2 = norm(h) * w2 (and the next pre-norm, fused)
#ifdef SG
// SG: reductions with subgroupAdd (one barrier instead of log2(WG)); the host
// uses this variant where subgroup arithmetic is supported.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer XBuf { float x[]; };
layout(binding = 1) readonly buffer WBuf { float w[]; };
layout(binding = 2) buffer HBuf { float h[]; };
layout(binding = 3) readonly buffer W2Buf { float w2[]; };
layout(binding = 4) writeonly buffer O2Buf { float out2[]; };

// Mirrors struct norm_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint n;
	uint mode;
	float eps;
	uint pad;
} p;

shared float red[WG];

#ifdef SG
float block_sum(float v)
{
	v = subgroupAdd(v);
	if (subgroupElect())
		red[gl_SubgroupID] = v;
	barrier();
	float r = 0.0;
	for (uint i = 0u; i < gl_NumSubgroups; i++)
		r += red[i];
	barrier();
	return r;
}
#else
float block_sum(float v)
{
	uint tid = gl_LocalInvocationID.x;
	red[tid] = v;
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (tid < s)
			red[tid] += red[tid + s];
		barrier();
	}
	float r = red[0];
	barrier();
	return r;
}
#endif

// Each thread holds its elements of the row (at most PER of them: the host
// passes PER >= n / WG) in registers and loads all of them, x, h, w and w2,
// before the first reduction, so the kernel waits for memory once. A loop
// over the row keeps one load in flight per thread: h is written between the
// reads, and the compiler cannot move a read of one binding above a write to
// another (they may alias), so every element cost a round trip (27B's
// 5376-wide rows: 15 us per dispatch, 124 dispatches per token). Elements past
// n add 0.0, which changes no sum.
layout(constant_id = 1) const uint PER = 16;

void main()
{
	uint o = gl_WorkGroupID.x * p.n;
	uint tid = gl_LocalInvocationID.x;
	float xv[PER], hv[PER], wv[PER], w2v[PER];
	[[unroll]] for (uint k = 0u; k < PER; k++) {
		uint i = tid + k * WG;
		bool in_row = i < p.n;
		xv[k] = in_row ? x[o + i] : 0.0;
		hv[k] = in_row && p.mode != 0u ? h[o + i] : 0.0;
		wv[k] = in_row ? w[i] : 0.0;
		w2v[k] = in_row && p.mode == 3u ? w2[i] : 0.0;
	}
	float ss = 0.0;
	[[unroll]] for (uint k = 0u; k < PER; k++)
		ss += xv[k] * xv[k];
	float r = inversesqrt(block_sum(ss) / float(p.n) + p.eps);
	if (p.mode == 0u) {
		[[unroll]] for (uint k = 0u; k < PER; k++) {
			uint i = tid + k * WG;
			if (i < p.n)
				h[o + i] = xv[k] * r * wv[k];
		}
		return;
	}
	float ss2 = 0.0;
	[[unroll]] for (uint k = 0u; k < PER; k++) {
		uint i = tid + k * WG;
		float v = hv[k] + xv[k] * r * wv[k];
		hv[k] = v;
		if (i < p.n) {
			h[o + i] = v;
			ss2 += v * v;
		}
	}
	if (p.mode != 3u)
		return;
	float r2 = inversesqrt(block_sum(ss2) / float(p.n) + p.eps);
	[[unroll]] for (uint k = 0u; k < PER; k++) {
		uint i = tid + k * WG;
		if (i < p.n)
			out2[o + i] = hv[k] * r2 * w2v[k];
	}
}
