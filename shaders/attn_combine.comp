#version 450
// attn_combine: merge the per-split partial softmax results of attn.comp into
// out[t][h*head_dim + d]. The split weights exp(m_s - M) / L are computed once
// into shared memory; empty splits (m = -inf) are skipped, and the remaining
// loads of one output are independent. A token whose range fits one split
// (attn_chunk) was written by attn itself and is skipped here, unless p.all
// (flash_attn_cm's splits: every token has them). p.x16 = 1:
// the rows as x16 too (attn_x16.glsl, as attn writes them).
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Part { float part[]; };
layout(binding = 1) writeonly buffer Out { float outv[]; };
layout(binding = 2) readonly buffer Step { uint step[]; };
layout(binding = 3) writeonly buffer OutQ { uint outq[]; };

// Mirrors struct combine_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint head_dim;
	uint n_head;
	uint n_split;
	uint window;     // as attn.comp's: 0 = global layer
	uint min_chunk;
	uint one_len;
	uint x16;        // 1: the rows as x16 too (outq)
	uint all;        // 1: every token (no token was written by the attention kernel)
} p;

#define MAX_SPLIT 256u  // engine: n_split <= 256
shared float sm[MAX_SPLIT], sl[MAX_SPLIT];
shared uint act[MAX_SPLIT], n_act;
#define MAX_HD 512u  // head_dim of an x16 row at most (the engine checks)
shared float orow[MAX_HD];
#define X16_HEAD_ROW orow
#include "attn_x16.glsl"

void main()
{
	uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, hd = p.head_dim, tid = gl_LocalInvocationID.x;
	uint pos = step[STEP_TPOS(t)];
	// an image span's row sees up to the span's last position (attn.glsl's last)
	uint last = max(pos, step[STEP_TOKENS + 4u * t + 3u]);
	uint lo = (p.window > 0u && pos + 1u > p.window) ? pos + 1u - p.window : 0u;
	if (p.all == 0u && attn_chunk(last + 1u - lo, p.n_split, p.min_chunk, p.one_len) >= last + 1u - lo)
		return;
	uint ns = min(p.n_split, MAX_SPLIT);
	uint base = (t * p.n_head + h) * p.n_split * (hd + 2u);
	for (uint s = tid; s < ns; s += WG) {
		sm[s] = part[base + s * (hd + 2u)];
		sl[s] = part[base + s * (hd + 2u) + 1u];
	}
	barrier();
	float M = NEG_INF;
	for (uint s = 0u; s < ns; s++)
		M = max(M, sm[s]);
	float L = 0.0;
	for (uint s = 0u; s < ns; s++)
		L += sm[s] != NEG_INF ? sl[s] * exp(sm[s] - M) : 0.0;
	barrier();
	// compact the non-empty splits and fold 1/L into their weights
	if (tid == 0u) {
		uint k = 0u;
		for (uint s = 0u; s < ns; s++)
			if (sm[s] != NEG_INF) {
				act[k] = s;
				sl[k] = exp(sm[s] - M) / L;
				k++;
			}
		n_act = k;
	}
	barrier();
	uint na = n_act;
	for (uint d = tid; d < hd; d += WG) {
		float a = 0.0;
		for (uint k = 0u; k < na; k++)
			a += part[base + act[k] * (hd + 2u) + 2u + d] * sl[k];
		outv[t * p.n_head * hd + h * hd + d] = a;
		if (p.x16 != 0u)
			orow[d] = a;
	}
	if (p.x16 != 0u)
		head_x16(t, h, hd, p.n_head);
}
