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

void main()
{
	uint o = gl_WorkGroupID.x * p.n;
	uint tid = gl_LocalInvocationID.x;
	float ss = 0.0;
	for (uint i = tid; i < p.n; i += WG)
		ss += x[o + i] * x[o + i];
	float r = inversesqrt(block_sum(ss) / float(p.n) + p.eps);
	if (p.mode == 0u) {
		for (uint i = tid; i < p.n; i += WG)
			h[o + i] = x[o + i] * r * w[i];
		return;
	}
	float ss2 = 0.0;
	for (uint i = tid; i < p.n; i += WG) {
		float v = h[o + i] + x[o + i] * r * w[i];
		h[o + i] = v;
		ss2 += v * v;
	}
	if (p.mode != 3u)
		return;
	float r2 = inversesqrt(block_sum(ss2) / float(p.n) + p.eps);
	// each thread rereads only the elements it wrote itself
	for (uint i = tid; i < p.n; i += WG)
		out2[o + i] = h[o + i] * r2 * w2[i];
}
