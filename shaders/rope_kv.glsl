// rope_kv.glsl (rope_kv.comp, rope_kv_sg.comp): per (head, token) of the fused qkv buffer: RMSNorm over head_dim with
// the q_norm / k_norm weight, NEOX RoPE at token t's own position (from the step
// buffer), then q is written back in place and k (plus the matching v head) is
// appended to this layer's KV cache at that position (the row its block table
// gives: paged cache, see KV_ROW in common.glsl). Decode steps whose rows are
// distinct sequences do this inside attn.comp instead (same norm_rope).
#ifdef SG
// SG (the _sg kernels): workgroup reductions with subgroup operations and one
// barrier, where the device has subgroup arithmetic (the engine's choice, as
// for rmsnorm_sg); rope.glsl's norm reduces the same way in attn_sg and
// rope_kv_sg, so the two stay bitwise equal.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(binding = 0) buffer QKV { float qkv[]; };
layout(binding = 1) readonly buffer QN { float qn[]; };
layout(binding = 2) readonly buffer KN { float kn[]; };
#ifndef KV_TYPE
#define KV_TYPE 0
#endif
#if KV_TYPE == 0
layout(binding = 3) writeonly buffer KC { float kc[]; };
layout(binding = 4) writeonly buffer VC { float vc[]; };
#else
// the cache as words (kv.glsl's layouts; bound at 3 and 4 here)
layout(binding = 3) buffer KCU { uint kcu[]; };
layout(binding = 4) buffer VCU { uint vcu[]; };
#endif
layout(binding = 5) readonly buffer Step { uint step[]; };
layout(binding = 6) readonly buffer Tab { uint tab[]; };

// Mirrors struct rope_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint head_dim;
	uint n_head;
	uint n_kv;
	uint qkv_stride;
	float eps;
	float base;        // theta base of this layer (local or global)
	float freq_scale;  // 1 / linear scaling factor
	uint kv_cap;       // positions a sequence holds
	uint tab_off;      // this layer kind's first table entry
	uint tab_mod;      // and its entry count (ring size on sliding layers)
} p;

shared float rv[512], rw[512];
shared float rr[WG];
#include "rope.glsl"
#define KV_NO_BIND 1
#include "kv.glsl"

void main()
{
	uint hh = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
	uint hd = p.head_dim;
	uint pos = step[STEP_TPOS(t)];
	bool is_q = hh < p.n_head;
	uint o = t * p.qkv_stride + hh * hd;
	for (uint i = tid; i < hd; i += WG) {
		rv[i] = qkv[o + i];
		rw[i] = is_q ? qn[i] : kn[i];
	}
	barrier();
	norm_rope(hd, pos, p.eps, p.base, p.freq_scale);
	if (is_q) {
		for (uint i = tid; i < hd; i += WG)
			qkv[o + i] = rv[i];
		return;
	}
	if (pos >= p.kv_cap)
		return;
	uint kvh = hh - p.n_head;
	uint ko = KV_ROW(tab, step[STEP_TBASE(t)], p.tab_off, p.tab_mod, pos) * (p.n_kv * hd) + kvh * hd;
	uint vo = t * p.qkv_stride + (p.n_head + p.n_kv + kvh) * hd;
#if KV_TYPE == 0
	for (uint i = tid; i < hd; i += WG) {
		kc[ko + i] = rv[i];
		vc[ko + i] = qkv[vo + i];
	}
#elif KV_TYPE == 1
	// ko and hd are even: a thread writes whole words
	for (uint i = 2u * tid; i < hd; i += 2u * WG) {
		kcu[(ko + i) >> 1] = packHalf2x16(vec2(rv[i], rv[i + 1u]));
		vcu[(ko + i) >> 1] = packHalf2x16(vec2(qkv[vo + i], qkv[vo + i + 1u]));
	}
#else
	// a thread per 32-value block of k, then of v (ko is a multiple of 32)
	for (uint j = tid; j < 2u * (hd / 32u); j += WG) {
		bool isv = j >= hd / 32u;
		uint bj = isv ? j - hd / 32u : j;
		float x[32];
		for (uint i = 0u; i < 32u; i++)
			x[i] = isv ? qkv[vo + 32u * bj + i] : rv[32u * bj + i];
		int c[32];
		float d = kv_q8_block(x, c);
		uint blk = (ko >> 5) + bj;
		if (isv)
			KV_Q8_STORE(vcu, blk, c, d)
		else
			KV_Q8_STORE(kcu, blk, c, d)
	}
#endif
}
