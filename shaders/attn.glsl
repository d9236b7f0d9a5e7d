// attn.glsl (attn.comp, attn_sg.comp): decode/prefill attention, flash-decoding style. Workgroup (head, token,
// split) handles one contiguous slice of the visible keys [lo, pos] (causal, and
// a sliding window when window > 0), keeping an online softmax, and writes
// (max, sum, unnormalized output) for attn_combine. The slice is computed from
// the position in the step buffer, so one recorded command buffer serves every
// position. GQA: query head h reads kv head h / (n_head / n_kv). Keys live in
// a paged cache: each key's row comes from the sequence's block table (KV_ROW).
// The token's own key (position pos) is always folded in as a last online-
// softmax step of the split that holds it, from shared memory: read from the
// cache (rope_kv ran before), or with p.rope = 1 (decode steps whose rows are
// distinct sequences) normalized and rotated here from the raw qkv row, as is
// q, and appended to the cache by one workgroup per (token, kv head): no
// rope_kv dispatch, and bitwise the same numbers either way (rope.glsl).
// A token whose range fits one split (attn_chunk) is normalized and written
// to out[] here: attn_combine skips it, and the host leaves the combine
// dispatch out of steps whose tokens are all that short.
// WO_X16 (the _wox16 kernels, which the engine takes where wo runs on x16)
// and p.x16 = 1: whoever writes a head's output row (here, the fused merge,
// or attn_combine) also writes it as x16 (x16.glsl) to outq[], for wo's
// integer dot-product kernel; head_dim is then a multiple of X16_GROUP, so a
// head is whole groups of the token's row (attn_x16.glsl). The kernels
// without WO_X16 have none of that code: on the H100 its mere presence cost
// 1B, 4B and 12B ~1% of decode (BENCHMARKS.md).
// ATTN_PREFILL (the _pre kernels, which the engine takes where rope_kv ran
// before: prefill chunks): p.rope is 0, and none of the q/k norm, RoPE and
// KV append code is compiled. Present but never taken, it made 1B's prefill
// attention 6% slower on the H100 (the same registers; BENCHMARKS.md).
#ifdef ATTN_PREFILL
#define ATTN_ROPE false
#else
#define ATTN_ROPE (p.rope != 0u)
#endif
#ifdef SG
// SG (the _sg kernels): workgroup reductions with subgroup operations and one
// barrier, where the device has subgroup arithmetic (the engine's choice, as
// for rmsnorm_sg); rope.glsl's norm reduces the same way in attn_sg and
// rope_kv_sg, so the two stay bitwise equal.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#ifdef WO_X16
#extension GL_KHR_shader_subgroup_shuffle : enable
#define X16_SG 1
#endif
#endif
#extension GL_EXT_control_flow_attributes : enable
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
#ifndef KV_TYPE
#define KV_TYPE 0
#endif
#if KV_TYPE == 0
layout(binding = 1) readonly buffer KC { float kc[]; };
layout(binding = 1) readonly buffer KC4 { vec4 kc4[]; };
layout(binding = 1) writeonly buffer KCW { float kcw[]; };  // p.rope: the appended key
layout(binding = 2) readonly buffer VC { float vc[]; };
layout(binding = 2) readonly buffer VC4 { vec4 vc4[]; };
layout(binding = 2) writeonly buffer VCW { float vcw[]; };
#define KLOAD4(q) kc4[q]
#define VLOAD4(q) vc4[q]
#define KLOAD1(e) kc[e]
#define VLOAD1(e) vc[e]
#else
// f16 or q8_0 (the _f16 / _q8 kernels): kv.glsl's words and loads
#include "kv.glsl"
#endif
// coherent: with FUSE, the merging workgroup reads the other workgroups' partials
layout(binding = 3) coherent buffer Part { float part[]; };
layout(binding = 3) coherent buffer PartU { uint partu[]; };
layout(binding = 4) readonly buffer Step { uint step[]; };
layout(binding = 5) writeonly buffer Out { float outv[]; };
layout(binding = 6) readonly buffer Tab { uint tab[]; };
layout(binding = 7) readonly buffer QN { float qn[]; };
layout(binding = 8) readonly buffer KN { float kn[]; };
#ifdef WO_X16
layout(binding = 9) writeonly buffer OutQ { uint outq[]; };
#endif

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
	// p.rope = 1: q/k RMSNorm + RoPE here (rope_kv.comp's push values)
	float eps;
	float base;
	float freq_scale;
	uint kv_cap;
	uint rope;
	uint one_len;    // attn_chunk: ranges of at most one_len keys are one split
	uint x16;        // 1: out[]'s rows as x16 too (outq)
} p;

#define MAXD 8u  // head_dim <= MAXD * WG
#define PV_ACC 16u  // vec4 accumulators of the P.V loop (a power of two)
// Shared arrays sized by head_dim when the host gives it at pipeline creation
// (the engine does): at their 512-element caps they took ~11 KB per
// workgroup, which held the H100 to ~20 resident workgroups of 64 threads
// per SM and made prefill attention 35% slower; at head_dim 256 they take 5 KB.
const uint SH4 = HD > 0u ? (HD + 3u) / 4u : 128u;
const uint SH = SH4 * 4u;
shared vec4 q4[SH4];
shared vec4 kn4[SH4], vn4[SH4];  // the token's own key and value
shared float rv[SH], rw[SH];
shared float rr[WG];
// the token's own key beside q in rope.glsl's pass (p.rope, the split that holds it)
shared float rv2[SH], rw2[SH];
shared float rr2[WG];
#define ROPE_TWO 1
#include "rope.glsl"
shared float pr[WG];
shared uint rowk[WG];  // cache row of key kb + i (paged: not contiguous across blocks)
shared float red[WG];
shared uint merge_here;  // FUSE: this workgroup counted its head's last split
// P.V's key slices (main): where the host gives head_dim and a head has
// fewer vec4s than the workgroup has threads (27B's 128 dims: 32 of 64), the
// slices' count, a constant so that a kernel without slices (HD >= 4 WG, or
// unknown) is the one it was; pvs[] holds slices 1.. for slice 0's sum
// (Debian 12's glslc fails to optimize these constants written with &&)
const uint PV_D4 = HD >= 4u ? HD / 4u : WG;
const uint PV_KS = PV_D4 < WG ? WG / PV_D4 : 1u;
shared vec4 pvs[PV_KS > 1u ? WG : 1u];
#ifdef WO_X16
// the head's output row for its x16 copy, in its own array: stores to rw[],
// which rope's precise norm reads, made glslang mark every operation that
// feeds the row NoContraction (the attention loop without FMAs; the same
// stores under a constant-false branch did it to the kernels without the copy)
shared float x16row[MAXD * WG];
#define X16_HEAD_ROW x16row
#include "attn_x16.glsl"
#define X16_ROWS (p.x16 != 0u)
#else
// no copy: the code under X16_ROWS compiles to nothing
#define X16_ROWS false
#define head_x16(t, h, hd, n_head)
#define head_x16_run(t, h, hd, n_head, d4, v)
#endif

#ifdef SG
// The workgroup's max or sum: each subgroup's, then those of the subgroups.
// rowk[] and pr[], written before a call, are published by its barrier.
shared float sgred[WG];
float wg_reduce(float v, bool is_max)
{
	v = is_max ? subgroupMax(v) : subgroupAdd(v);
	if (subgroupElect())
		sgred[gl_SubgroupID] = v;
	barrier();
	float r = sgred[0];
	for (uint i = 1u; i < gl_NumSubgroups; i++)
		r = is_max ? max(r, sgred[i]) : r + sgred[i];
	barrier();
	return r;
}
#else
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
#endif

void main()
{
	uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, sp = gl_WorkGroupID.z;
	uint tid = gl_LocalInvocationID.x, hd = HD > 0u ? HD : p.head_dim;
	uint pos = step[STEP_TPOS(t)];       // each token its own causal range
	uint kv_base = step[STEP_TBASE(t)];  // and its own sequence's block table
	// the last visible key: pos, or inside an image span (the record's fourth
	// word, engine_image.c) the span's last position, every key of the span
	// written before (rope_kv; p.rope steps never hold a span)
	uint last = ATTN_ROPE ? pos : max(pos, step[STEP_TOKENS + 4u * t + 3u]);
	uint kvh = h / (p.n_head / p.n_kv);
	uint kvs = p.n_kv * hd;
	uint lo = (p.window > 0u && pos + 1u > p.window) ? pos + 1u - p.window : 0u;
	uint len = last + 1u - lo;
	uint chunk = attn_chunk(len, p.n_split, p.min_chunk, p.one_len);
	bool single = chunk >= len;  // split 0 holds every key and writes out[]
	if (single && sp > 0u)
		return;
	uint k0 = lo + sp * chunk;
	uint k1 = min(k0 + chunk, last + 1u);
	bool empty = k0 >= k1, fresh = !empty && k1 == last + 1u;  // fresh: this split holds key last
	uint kend = fresh ? last : k1;  // keys [k0, kend) from the cache, then key last
	uint hd16 = (hd + 15u) / 16u * 4u;  // vec4s of a head, zero padded to a multiple of 4
	uint qo = t * p.qkv_stride + h * hd;
	// p.rope: this split holds the token's own key, whose raw k, its norm
	// weight and v come from qkv; load them now, beside q, so that no
	// memory round trip waits behind the q norm, the keys and the barriers
	uint kvo = t * p.qkv_stride + (p.n_head + kvh) * hd, vo = t * p.qkv_stride + (p.n_head + p.n_kv + kvh) * hd;
	bool own = ATTN_ROPE && fresh;
	float kraw[MAXD], knw[MAXD];  // element tid + di * WG
	vec4 vraw[2];                 // v's vec4 tid + di * WG (vn4 and the KV append)
	for (uint di = 0u; di < MAXD; di++) {
		uint i = tid + di * WG;
		kraw[di] = own && i < hd ? qkv[kvo + i] : 0.0;
		knw[di] = own && i < hd ? kn[i] : 0.0;
	}
	for (uint di = 0u; di < 2u; di++) {
		uint i = tid + di * WG;
		vec4 vv = vec4(0.0);
		for (uint c = 0u; c < 4u; c++)
			vv[c] = own && i < hd16 && 4u * i + c < hd ? qkv[vo + 4u * i + c] : 0.0;
		vraw[di] = vv;
	}
	if (ATTN_ROPE && !empty) {
		for (uint i = tid; i < hd; i += WG) {
			rv[i] = qkv[qo + i];
			rw[i] = qn[i];
		}
		for (uint di = 0u; own && di < MAXD; di++) {
			uint i = tid + di * WG;
			if (i < hd) {
				rv2[i] = kraw[di];
				rw2[i] = knw[di];
			}
		}
		barrier();
		// q and the token's own key in one pass (their angles are the same)
		norm_rope(hd, pos, p.eps, p.base, p.freq_scale, own);
		if (own) {
			// the first query head of the kv group appends the key and value
			uint ko = KV_ROW(tab, kv_base, p.tab_off, p.tab_mod, pos) * kvs + kvh * hd;
			bool writer = h % (p.n_head / p.n_kv) == 0u && pos < p.kv_cap;
#if KV_TYPE == 0
			if (writer) {
				for (uint i = tid; i < hd; i += WG)
					kcw[ko + i] = rv2[i];
				for (uint di = 0u; di < 2u; di++)
					for (uint c = 0u; c < 4u; c++) {
						uint i = 4u * (tid + di * WG) + c;
						if (i < hd)
							vcw[ko + i] = vraw[di][c];
					}
			}
#endif
			// published by the barrier after q4[]
			for (uint di = 0u; di < 2u; di++) {
				uint i = tid + di * WG;
				if (i >= hd16)
					break;
				vec4 kv = vec4(0.0);
				for (uint c = 0u; c < 4u; c++)
					if (4u * i + c < hd)
						kv[c] = rv2[4u * i + c];
#if KV_TYPE == 1
				// the cache's f16 values, here as in the cache (ko, hd even)
				uvec2 kw = uvec2(packHalf2x16(kv.xy), packHalf2x16(kv.zw));
				uvec2 vw = uvec2(packHalf2x16(vraw[di].xy), packHalf2x16(vraw[di].zw));
				if (writer)
					for (uint c = 0u; c < 2u; c++)
						if (4u * i + 2u * c < hd) {
							kcu[(ko >> 1) + 2u * i + c] = kw[c];
							vcu[(ko >> 1) + 2u * i + c] = vw[c];
						}
				kn4[i] = kv_h4(kw);
				vn4[i] = kv_h4(vw);
#else
				kn4[i] = kv;
				vn4[i] = vraw[di];
#endif
			}
		}
	}
	for (uint i = tid; i < hd16; i += WG) {
		vec4 v;
		for (uint c = 0u; c < 4u; c++)
			v[c] = 4u * i + c < hd ? (ATTN_ROPE ? rv[4u * i + c] : qkv[qo + 4u * i + c]) * p.scale : 0.0;
		q4[i] = v;
	}
	barrier();
#if KV_TYPE == 2
	if (ATTN_ROPE && !empty && fresh) {
		// q8_0: a thread per 32-value block of the own key, then of its
		// value, quantizes it (as rope_kv does), appends it (the writer head)
		// and leaves the values the cache gives back in kn4[]/vn4[]
		uint ko = KV_ROW(tab, kv_base, p.tab_off, p.tab_mod, pos) * kvs + kvh * hd;
		bool writer = h % (p.n_head / p.n_kv) == 0u && pos < p.kv_cap;
		for (uint j = tid; j < 2u * (hd / 32u); j += WG) {
			bool isv = j >= hd / 32u;
			uint bj = isv ? j - hd / 32u : j;
			float x[32];
			for (uint i = 0u; i < 32u; i++) {
				uint e = 32u * bj + i;
				x[i] = isv ? vn4[e >> 2][e & 3u] : kn4[e >> 2][e & 3u];
			}
			int c[32];
			float d = kv_q8_block(x, c);
			uint blk = (ko >> 5) + bj;
			if (writer) {
				if (isv)
					KV_Q8_STORE(vcu, blk, c, d)
				else
					KV_Q8_STORE(kcu, blk, c, d)
			}
			float dd = kv_q8_d16(d);
			for (uint i = 0u; i < 32u; i++) {
				uint e = 32u * bj + i;
				if (isv)
					vn4[e >> 2][e & 3u] = float(c[i]) * dd;
				else
					kn4[e >> 2][e & 3u] = float(c[i]) * dd;
			}
		}
		barrier();
	}
#endif
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
	// P.V's key slices: thread tid takes vec4 tid % nd4 of every PV_KS-th
	// key from slice ks = tid / nd4, so no thread idles and each waits on
	// half (or less) of the key round trips; the slices' sums meet in slice
	// 0 (tid < nd4) after the key loop
	uint nd4 = hd / 4u;
	uint ks = PV_KS > 1u ? tid / nd4 : 0u, kd4 = PV_KS > 1u ? tid % nd4 : tid;
	for (uint kb = k0; kb < kend; kb += WG) {
		uint j = kb + tid;
		float s = NEG_INF;
		uint row = j < kend ? KV_ROW(tab, kv_base, p.tab_off, p.tab_mod, j) : 0u;
		rowk[tid] = row;  // published to the P.V loop by wg_reduce's barriers
		if (j < kend) {
			uint ko = row * kvs + kvh * hd;
			if ((kvs & 3u) == 0u && (hd & 15u) == 0u) {
				// four independent vec4 loads per step keep several loads in flight
				vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0);
				uint k4 = ko >> 2;
				for (uint i = 0u; i < hd / 4u; i += 4u) {
					a0 += q4[i] * KLOAD4(k4 + i);
					a1 += q4[i + 1u] * KLOAD4(k4 + i + 1u);
					a2 += q4[i + 2u] * KLOAD4(k4 + i + 2u);
					a3 += q4[i + 3u] * KLOAD4(k4 + i + 3u);
				}
				s = dot((a0 + a1) + (a2 + a3), vec4(1.0));
			} else {
				s = 0.0;
				for (uint i = 0u; i < hd; i++)
					s += q4[i >> 2][i & 3u] * KLOAD1(ko + i);
			}
		}
		float mn = max(m, wg_reduce(s, true));
		float pj = j < kend ? exp(s - mn) : 0.0;
		pr[tid] = pj;
		float corr = exp(m - mn);
		l = l * corr + wg_reduce(pj, false);
		uint nk = min(WG, kend - kb);
		if (v4) {
			for (uint di = 0u; di < 2u; di++) {
				uint d4 = kd4 + di * WG;
				if (d4 < nd4 && ks < PV_KS) {
					uint vo4 = (kvh * hd) / 4u + d4, ks4 = kvs / 4u;
					// PV_ACC independent loads in flight per thread (4 left
					// decode's attention waiting on a round trip per 4 keys)
					vec4 a[PV_ACC];
					[[unroll]] for (uint u = 0u; u < PV_ACC; u++)
						a[u] = vec4(0.0);
					uint jj = ks;
					for (; jj + PV_KS * (PV_ACC - 1u) < nk; jj += PV_KS * PV_ACC)
						[[unroll]] for (uint u = 0u; u < PV_ACC; u++)
							a[u] += pr[jj + u * PV_KS] * VLOAD4(vo4 + rowk[jj + u * PV_KS] * ks4);
					for (; jj < nk; jj += PV_KS)
						a[0] += pr[jj] * VLOAD4(vo4 + rowk[jj] * ks4);
					[[unroll]] for (uint w = PV_ACC / 2u; w > 0u; w >>= 1)
						[[unroll]] for (uint u = 0u; u < w; u++)
							a[u] += a[u + w];
					o4[di] = o4[di] * corr + a[0];
				}
			}
		} else for (uint di = 0u; di < MAXD; di++) {
			uint d = tid + di * WG;
			if (d < hd) {
				uint vo = kvh * hd + d;
				float a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
				uint jj = 0u;
				for (; jj + 4u <= nk; jj += 4u) {
					a0 += pr[jj] * VLOAD1(vo + rowk[jj] * kvs);
					a1 += pr[jj + 1u] * VLOAD1(vo + rowk[jj + 1u] * kvs);
					a2 += pr[jj + 2u] * VLOAD1(vo + rowk[jj + 2u] * kvs);
					a3 += pr[jj + 3u] * VLOAD1(vo + rowk[jj + 3u] * kvs);
				}
				for (; jj < nk; jj++)
					a0 += pr[jj] * VLOAD1(vo + rowk[jj] * kvs);
				o[di] = o[di] * corr + ((a0 + a1) + (a2 + a3));
			}
		}
		m = mn;
		barrier();
	}
	if (v4 && PV_KS > 1u) {
		// every slice rescaled by the same corrections: their sum is the row
		pvs[tid] = o4[0];
		barrier();
		if (ks == 0u)
			for (uint k = 1u; k < PV_KS; k++)
				o4[0] += pvs[tid + k * nd4];
	}
	if (fresh) {
		// p.rope: kn4[] and vn4[] hold the key and value since the start
		if (!ATTN_ROPE) {
			uint ko = KV_ROW(tab, kv_base, p.tab_off, p.tab_mod, last) * kvs + kvh * hd;
			for (uint di = 0u; di < 2u; di++) {
				uint i = tid + di * WG;
				if (i >= hd16)
					break;
				vec4 kv = vec4(0.0), vv = vec4(0.0);
				for (uint c = 0u; c < 4u; c++)
					if (4u * i + c < hd) {
						kv[c] = KLOAD1(ko + 4u * i + c);
						vv[c] = VLOAD1(ko + 4u * i + c);
					}
				kn4[i] = kv;
				vn4[i] = vv;
			}
			barrier();
		}
		// every thread forms the same score from shared memory
		vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0);
		for (uint i = 0u; i < hd16; i += 4u) {
			a0 += q4[i] * kn4[i];
			a1 += q4[i + 1u] * kn4[i + 1u];
			a2 += q4[i + 2u] * kn4[i + 2u];
			a3 += q4[i + 3u] * kn4[i + 3u];
		}
		float s = dot((a0 + a1) + (a2 + a3), vec4(1.0));
		float mn = max(m, s);
		float pj = exp(s - mn), corr = exp(m - mn);
		l = l * corr + pj;
		if (v4) {
			for (uint di = 0u; di < 2u; di++) {
				uint d4 = tid + di * WG;
				if (d4 < hd / 4u)
					o4[di] = o4[di] * corr + pj * vn4[d4];
			}
		} else {
			for (uint di = 0u; di < MAXD; di++) {
				uint d = tid + di * WG;
				if (d < hd)
					o[di] = o[di] * corr + pj * vn4[d >> 2][d & 3u];
			}
		}
		m = mn;
	}
	if (single) {
		uint oo = t * p.n_head * hd + h * hd;
		if (v4) {
			for (uint di = 0u; di < 2u; di++) {
				uint d4 = tid + di * WG;
				if (d4 < hd / 4u)
					for (uint c = 0u; c < 4u; c++) {
						outv[oo + 4u * d4 + c] = o4[di][c] / l;
#if defined(WO_X16) && !defined(SG)
						if (X16_ROWS)
							X16_HEAD_ROW[4u * d4 + c] = o4[di][c] / l;
#endif
					}
			}
#ifdef SG
			// the copy from registers: a thread's four dims are a run
			if (X16_ROWS) {
				for (uint di = 0u; di < 2u && di * WG < hd / 4u; di++)
					head_x16_run(t, h, hd, p.n_head, tid + di * WG, o4[di] / l);
				return;
			}
#endif
		} else {
			for (uint di = 0u; di < MAXD; di++) {
				uint d = tid + di * WG;
				if (d < hd) {
					outv[oo + d] = o[di] / l;
#ifdef WO_X16
					if (X16_ROWS)
						X16_HEAD_ROW[d] = o[di] / l;
#endif
				}
			}
		}
		if (X16_ROWS)
			head_x16(t, h, hd, p.n_head);
		return;
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
		merge_here = atomicAdd(partu[ci], 1u) == p.n_split - 1u ? 1u : 0u;
	barrier();
	if (merge_here == 0u)
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
#ifdef WO_X16
		if (X16_ROWS)
			X16_HEAD_ROW[d] = a / L;
#endif
	}
	if (X16_ROWS)
		head_x16(t, h, hd, p.n_head);
	if (tid == 0u)
		atomicExchange(partu[ci], 0u);
}
