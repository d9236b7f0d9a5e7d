#version 450
// attn: decode/prefill attention, flash-decoding style. Workgroup (head, token,
// split) handles one contiguous slice of the visible keys [lo, pos] (causal, and
// a sliding window when window > 0), keeping an online softmax, and writes
// (max, sum, unnormalized output) for attn_combine. The slice is computed from
// the position in the step buffer, so one recorded command buffer serves every
// position. GQA: query head h reads kv head h / (n_head / n_kv). Keys live in
// a paged cache: each key's row comes from the sequence's block table (KV_ROW).
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
// head_dim when the host knows it at pipeline creation (0: read p.head_dim).
// A constant trip count lets the driver unroll the K loop, so a thread's key
// loads are all in flight at once instead of one loop round trip at a time.
layout(constant_id = 1) const uint HD = 0;
// 1: the last workgroup of each (token, head) to finish also merges the splits
// and writes out[] (no attn_combine dispatch). Counters live in part[] from
// p.cnt_off on, are zero between dispatches and reset by that last workgroup.
layout(constant_id = 2) const uint FUSE = 0;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer QKV { float qkv[]; };
layout(binding = 1) readonly buffer KC { float kc[]; };
layout(binding = 1) readonly buffer KC4 { vec4 kc4[]; };
layout(binding = 2) readonly buffer VC { float vc[]; };
layout(binding = 2) readonly buffer VC4 { vec4 vc4[]; };
// coherent: with FUSE, the merging workgroup reads the other workgroups' partials
layout(binding = 3) coherent buffer Part { float part[]; };
layout(binding = 3) coherent buffer PartU { uint partu[]; };
layout(binding = 4) readonly buffer Step { uint step[]; };
layout(binding = 5) writeonly buffer Out { float outv[]; };
layout(binding = 6) readonly buffer Tab { uint tab[]; };

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
	uint cnt_off;    // FUSE: index of the (token, head) counters in part[]
	uint tab_off;    // paged KV: this layer kind's first table entry (KV_ROW)
	uint tab_mod;    // and its entry count
} p;

#define MAXD 8u  // head_dim <= MAXD * WG
shared vec4 q4[128];
shared float pr[WG];
shared uint rowk[WG];  // cache row of key kb + i (paged: not contiguous across blocks)
shared float red[WG];
shared uint last;

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
	uint tid = gl_LocalInvocationID.x, hd = HD > 0u ? HD : p.head_dim;
	uint pos = step[STEP_TPOS(t)];       // each token its own causal range
	uint kv_base = step[STEP_TBASE(t)];  // and its own sequence's block table
	uint kvh = h / (p.n_head / p.n_kv);
	uint kvs = p.n_kv * hd;
	uint lo = (p.window > 0u && pos + 1u > p.window) ? pos + 1u - p.window : 0u;
	uint len = pos + 1u - lo;
	uint chunk = max((len + p.n_split - 1u) / p.n_split, p.min_chunk);
	uint k0 = lo + sp * chunk;
	uint k1 = min(k0 + chunk, pos + 1u);
	for (uint i = tid; i < (hd + 3u) / 4u; i += WG) {
		uint b = t * p.qkv_stride + h * hd + 4u * i;
		vec4 v;
		for (uint c = 0u; c < 4u; c++)
			v[c] = 4u * i + c < hd ? qkv[b + c] * p.scale : 0.0;
		q4[i] = v;
	}
	barrier();
	float m = NEG_INF, l = 0.0;
	float o[MAXD];
	for (uint i = 0u; i < MAXD; i++)
		o[i] = 0.0;
	// vec4 path for P.V: each thread owns whole vec4s of the output (coalesced
	// 16-byte loads, a quarter of the load instructions of the scalar path)
	bool v4 = (kvs & 3u) == 0u && (hd & 3u) == 0u && hd <= 8u * WG;
	vec4 o4[2];
	o4[0] = vec4(0.0);
	o4[1] = vec4(0.0);
	for (uint kb = k0; kb < k1; kb += WG) {
		uint j = kb + tid;
		float s = NEG_INF;
		uint row = j < k1 ? KV_ROW(tab, kv_base, p.tab_off, p.tab_mod, j) : 0u;
		rowk[tid] = row;  // published to the P.V loop by wg_reduce's barriers
		if (j < k1) {
			uint ko = row * kvs + kvh * hd;
			if ((kvs & 3u) == 0u && (hd & 15u) == 0u) {
				// four independent vec4 loads per step keep several loads in flight
				vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0);
				uint k4 = ko >> 2;
				for (uint i = 0u; i < hd / 4u; i += 4u) {
					a0 += q4[i] * kc4[k4 + i];
					a1 += q4[i + 1u] * kc4[k4 + i + 1u];
					a2 += q4[i + 2u] * kc4[k4 + i + 2u];
					a3 += q4[i + 3u] * kc4[k4 + i + 3u];
				}
				s = dot((a0 + a1) + (a2 + a3), vec4(1.0));
			} else {
				s = 0.0;
				for (uint i = 0u; i < hd; i++)
					s += q4[i >> 2][i & 3u] * kc[ko + i];
			}
		}
		float mn = max(m, wg_reduce(s, true));
		float pj = j < k1 ? exp(s - mn) : 0.0;
		pr[tid] = pj;
		float corr = exp(m - mn);
		l = l * corr + wg_reduce(pj, false);
		uint nk = min(WG, k1 - kb);
		if (v4) {
			for (uint di = 0u; di < 2u; di++) {
				uint d4 = tid + di * WG;
				if (d4 < hd / 4u) {
					uint vo4 = (kvh * hd) / 4u + d4, ks4 = kvs / 4u;
					vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0);
					uint jj = 0u;
					for (; jj + 4u <= nk; jj += 4u) {
						a0 += pr[jj] * vc4[vo4 + rowk[jj] * ks4];
						a1 += pr[jj + 1u] * vc4[vo4 + rowk[jj + 1u] * ks4];
						a2 += pr[jj + 2u] * vc4[vo4 + rowk[jj + 2u] * ks4];
						a3 += pr[jj + 3u] * vc4[vo4 + rowk[jj + 3u] * ks4];
					}
					for (; jj < nk; jj++)
						a0 += pr[jj] * vc4[vo4 + rowk[jj] * ks4];
					o4[di] = o4[di] * corr + ((a0 + a1) + (a2 + a3));
				}
			}
		} else for (uint di = 0u; di < MAXD; di++) {
			uint d = tid + di * WG;
			if (d < hd) {
				uint vo = kvh * hd + d;
				float a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
				uint jj = 0u;
				for (; jj + 4u <= nk; jj += 4u) {
					a0 += pr[jj] * vc[vo + rowk[jj] * kvs];
					a1 += pr[jj + 1u] * vc[vo + rowk[jj + 1u] * kvs];
					a2 += pr[jj + 2u] * vc[vo + rowk[jj + 2u] * kvs];
					a3 += pr[jj + 3u] * vc[vo + rowk[jj + 3u] * kvs];
				}
				for (; jj < nk; jj++)
					a0 += pr[jj] * vc[vo + rowk[jj] * kvs];
				o[di] = o[di] * corr + ((a0 + a1) + (a2 + a3));
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
	if (v4) {
		for (uint di = 0u; di < 2u; di++) {
			uint d4 = tid + di * WG;
			if (d4 < hd / 4u)
				for (uint c = 0u; c < 4u; c++)
					part[po + 2u + 4u * d4 + c] = o4[di][c];
		}
	} else {
		for (uint di = 0u; di < MAXD; di++) {
			uint d = tid + di * WG;
			if (d < hd)
				part[po + 2u + d] = o[di];
		}
	}
	if (FUSE == 0u)
		return;
	// publish this split's partial, then count it; the workgroup that brings the
	// count to n_split sees every other split's writes (each wrote, fenced, then
	// counted) and merges them exactly as attn_combine.comp does
	memoryBarrierBuffer();
	barrier();
	uint ci = p.cnt_off + t * p.n_head + h;
	if (tid == 0u)
		last = atomicAdd(partu[ci], 1u) == p.n_split - 1u ? 1u : 0u;
	barrier();
	if (last == 0u)
		return;
	memoryBarrierBuffer();
	uint base = (t * p.n_head + h) * p.n_split * (hd + 2u);
	float M = NEG_INF;
	for (uint s = 0u; s < p.n_split; s++)
		M = max(M, part[base + s * (hd + 2u)]);
	float L = 0.0;
	for (uint s = 0u; s < p.n_split; s++) {
		float ms = part[base + s * (hd + 2u)];
		if (ms != NEG_INF)
			L += part[base + s * (hd + 2u) + 1u] * exp(ms - M);
	}
	for (uint d = tid; d < hd; d += WG) {
		float a = 0.0;
		for (uint s = 0u; s < p.n_split; s++) {
			float ms = part[base + s * (hd + 2u)];
			if (ms != NEG_INF)
				a += part[base + s * (hd + 2u) + 2u + d] * exp(ms - M);
		}
		outv[t * p.n_head * hd + h * hd + d] = a / L;
	}
	if (tid == 0u)
		atomicExchange(partu[ci], 0u);
}
