#version 450
// vis_attn: the vision tower's multi-head attention, bidirectional (every
// patch sees every patch), one workgroup of 64 threads per (query, head).
// Each thread runs an online softmax over keys j = t, t+64, ... keeping its
// own max, sum and weighted value sum; the 64 partial results are then
// rescaled to the common max and added. q, k and v are rows of one buffer
// (stride qkv_stride, at offsets 0, n_embd and 2*n_embd); head h is columns
// [h*hd, h*hd + hd).
layout(local_size_x = 64) in;

#define MAXHD 128u

layout(binding = 0) readonly buffer QKV { float qkv[]; };
layout(binding = 1) writeonly buffer O { float o[]; };

// Mirrors struct vis_attn_push in gpu_worker/vision.c.
layout(push_constant) uniform Push {
	uint n, hd, n_embd, qkv_stride;
	float scale;
} p;

shared float qs[MAXHD];
shared float red_m[64];
shared float red_l[64];
shared float accs[64u * MAXHD];

void main()
{
	uint qi = gl_WorkGroupID.x, h = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
	uint hoff = h * p.hd;
	for (uint e = t; e < p.hd; e += 64u)
		qs[e] = qkv[qi * p.qkv_stride + hoff + e] * p.scale;
	barrier();
	float m = uintBitsToFloat(0xff800000u), l = 0.0;
	float acc[MAXHD];
	for (uint e = 0u; e < p.hd; e++)
		acc[e] = 0.0;
	for (uint j = t; j < p.n; j += 64u) {
		uint ko = j * p.qkv_stride + p.n_embd + hoff, vo = ko + p.n_embd;
		float s = 0.0;
		for (uint e = 0u; e < p.hd; e++)
			s += qs[e] * qkv[ko + e];
		float mn = max(m, s);
		float f = exp(m - mn), w = exp(s - mn);
		l = l * f + w;
		for (uint e = 0u; e < p.hd; e++)
			acc[e] = acc[e] * f + w * qkv[vo + e];
		m = mn;
	}
	red_m[t] = m;
	barrier();
	float mx = red_m[0];
	for (uint i = 1u; i < 64u; i++)
		mx = max(mx, red_m[i]);
	float f = l > 0.0 ? exp(m - mx) : 0.0;
	red_l[t] = l * f;
	for (uint e = 0u; e < p.hd; e++)
		accs[t * MAXHD + e] = acc[e] * f;
	barrier();
	float lt = 0.0;
	for (uint i = 0u; i < 64u; i++)
		lt += red_l[i];
	for (uint e = t; e < p.hd; e += 64u) {
		float s = 0.0;
		for (uint i = 0u; i < 64u; i++)
			s += accs[i * MAXHD + e];
		o[qi * p.n_embd + hoff + e] = s / lt;
	}
}
