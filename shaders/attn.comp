#version 450
// attn: decode/prefill attention, flash-decoding style. Workgroup (head, token,
// split) handles one contiguous slice of the visible keys [lo, pos] (causal, and
// a sliding window when window > 0), keeping an online softmax, and writes
// (max, sum, unnormalized output) for attn_combine. The slice is computed from
// the position in the step buffer, so one recorded command buffer serves every
// position. GQA: query head h reads kv head h / (n_head / n_kv).
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer QKV { float qkv[]; };
layout(binding = 1) readonly buffer KC { float kc[]; };
layout(binding = 2) readonly buffer VC { float vc[]; };
layout(binding = 3) writeonly buffer Part { float part[]; };
layout(binding = 4) readonly buffer Step { uint step[]; };

// Mirrors struct attn_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint head_dim;
	uint n_head;
	uint n_kv;
	uint qkv_stride;
	uint window;     // 0 = global layer
	uint n_split;
	float scale;     // 1/sqrt(query_pre_attn_scalar)
	uint min_chunk;
} p;

#define MAXD 8u  // head_dim <= MAXD * WG
shared float q[512];
shared float pr[WG];
shared float red[WG];

float wg_reduce(float v, bool is_max)
{
	uint tid = gl_LocalInvocationID.x;
	red[tid] = v;
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (tid < s)
			red[tid] = is_max ? max(red[tid], red[tid + s]) : red[tid] + red[tid + s];
		barrier();
	}
	float r = red[0];
	barrier();
	return r;
}

void main()
{
	uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, sp = gl_WorkGroupID.z;
	uint tid = gl_LocalInvocationID.x, hd = p.head_dim;
	uint pos = step[STEP_POS0] + t;
	uint kvh = h / (p.n_head / p.n_kv);
	uint kvs = p.n_kv * hd;
	uint lo = (p.window > 0u && pos + 1u > p.window) ? pos + 1u - p.window : 0u;
	uint len = pos + 1u - lo;
	uint chunk = max((len + p.n_split - 1u) / p.n_split, p.min_chunk);
	uint k0 = lo + sp * chunk;
	uint k1 = min(k0 + chunk, pos + 1u);
	for (uint i = tid; i < hd; i += WG)
		q[i] = qkv[t * p.qkv_stride + h * hd + i] * p.scale;
	barrier();
	float m = NEG_INF, l = 0.0;
	float o[MAXD];
	for (uint i = 0u; i < MAXD; i++)
		o[i] = 0.0;
	for (uint kb = k0; kb < k1; kb += WG) {
		uint j = kb + tid;
		float s = NEG_INF;
		if (j < k1) {
			s = 0.0;
			uint ko = j * kvs + kvh * hd;
			for (uint i = 0u; i < hd; i++)
				s += q[i] * kc[ko + i];
		}
		float mn = max(m, wg_reduce(s, true));
		float pj = j < k1 ? exp(s - mn) : 0.0;
		pr[tid] = pj;
		float corr = exp(m - mn);
		l = l * corr + wg_reduce(pj, false);
		uint nk = min(WG, k1 - kb);
		for (uint di = 0u; di < MAXD; di++) {
			uint d = tid + di * WG;
			if (d < hd) {
				float a = o[di] * corr;
				for (uint jj = 0u; jj < nk; jj++)
					a += pr[jj] * vc[(kb + jj) * kvs + kvh * hd + d];
				o[di] = a;
			}
		}
		m = mn;
		barrier();
	}
	uint po = ((t * p.n_head + h) * p.n_split + sp) * (hd + 2u);
	if (tid == 0u) {
		part[po] = m;
		part[po + 1u] = l;
	}
	for (uint di = 0u; di < MAXD; di++) {
		uint d = tid + di * WG;
		if (d < hd)
			part[po + 2u + d] = o[di];
	}
}
