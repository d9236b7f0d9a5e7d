#version 450
// vis_attn: the vision tower's multi-head attention, bidirectional (every
// patch sees every patch). A workgroup of 64 threads takes 64 queries of one
// head, one query per thread, and walks the keys in tiles of 32 staged in
// shared memory (K and V read once per 64 queries instead of once per
// query), keeping an online softmax per thread: running max, sum and the
// weighted value sum. q, k and v are rows of one buffer (stride qkv_stride,
// at offsets 0, n_embd and 2*n_embd); head h is columns [h*HD, h*HD + HD).
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HD = 64u; // head size (72 for Gemma 3's SigLIP)

#define BK 32u

layout(binding = 0) readonly buffer QKV { float qkv[]; };
layout(binding = 1) writeonly buffer O { float o[]; };

// Mirrors struct vis_attn_push in gpu_worker/vision.c.
layout(push_constant) uniform Push {
	uint n, hd, n_embd, qkv_stride;
	float scale;
} p;

shared float Ks[BK * HD];
shared float Vs[BK * HD];

void main()
{
	uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.y;
	uint qi = gl_WorkGroupID.x * 64u + t, hoff = h * HD;
	bool valid = qi < p.n;
	float q[HD], acc[HD];
	[[unroll]] for (uint e = 0u; e < HD; e++) {
		q[e] = valid ? qkv[qi * p.qkv_stride + hoff + e] * p.scale : 0.0;
		acc[e] = 0.0;
	}
	float m = uintBitsToFloat(0xff800000u), l = 0.0;
	for (uint k0 = 0u; k0 < p.n; k0 += BK) {
		for (uint i = t; i < BK * HD; i += 64u) {
			uint j = i / HD, e = i % HD, key = k0 + j;
			uint ko = key * p.qkv_stride + p.n_embd + hoff + e;
			Ks[i] = key < p.n ? qkv[ko] : 0.0;
			Vs[i] = key < p.n ? qkv[ko + p.n_embd] : 0.0;
		}
		barrier();
		uint kn = min(BK, p.n - k0);
		float s[BK];
		float mt = m;
		for (uint j = 0u; j < kn; j++) {
			float d = 0.0;
			[[unroll]] for (uint e = 0u; e < HD; e++)
				d += q[e] * Ks[j * HD + e];
			s[j] = d;
			mt = max(mt, d);
		}
		float f = exp(m - mt);
		l *= f;
		[[unroll]] for (uint e = 0u; e < HD; e++)
			acc[e] *= f;
		for (uint j = 0u; j < kn; j++) {
			float w = exp(s[j] - mt);
			l += w;
			[[unroll]] for (uint e = 0u; e < HD; e++)
				acc[e] += w * Vs[j * HD + e];
		}
		m = mt;
		barrier();
	}
	if (valid) {
		float inv = 1.0 / l;
		[[unroll]] for (uint e = 0u; e < HD; e++)
			o[qi * p.n_embd + hoff + e] = acc[e] * inv;
	}
}
