// flash_attn_cm.glsl (flash_attn_cm_h128.comp, flash_attn_cm_h256.comp, and
// their _f16/_q8 KV variants): prefill attention on the matrix cores, for
// steps whose rope_kv ran before (prefill chunks), where attn_pre would give
// every (token, head) a workgroup that reads all of the token's keys on its
// own: a 16K-token prompt read each key 16K times.
//
// A workgroup takes BR rows of one KV head: row r is (token, query head of
// the group), token-major, so the G = n_head / n_kv heads that share the KV
// head share every key tile. It walks the keys in blocks of BC: each block's
// keys (then values) go once into shared memory as f16, S = Q K^T (q already
// scaled) runs on the matrix cores, and P V adds into O in accumulators.
// Two passes over the keys: the first finds each row's maximum score, the
// second computes P = exp(S - max) with that final maximum, so O is never
// rescaled (a cooperative matrix's elements have no known place in the
// subgroup, so a per-row factor cannot be applied to an accumulator), at the
// price of S computed twice. l, the row's sum, adds the same f16-rounded P
// that enters P V.
//
// Few workgroups (1B: one KV head, 64 tiles of a 512-token chunk) split the
// keys: workgroup z of Z takes the blocks b with b % Z == z (absolute block
// numbers), writes its rows' (max, sum, unnormalized O) to part[] as attn
// does, and attn_combine merges the Z splits of every row (p.all). With one
// split the rows go to out[] normalized.
//
// Rows see the keys of their own sequence (the token's block table), from
// the window's start (sliding layers) to their own position. A tile whose
// tokens belong to several sequences (a chunk prefilling several prompts)
// runs once per run of rows with the same table, the others' P masked to 0.
//
// HD (the head's dimension: 32, 64, 128 or 256) is the includer's; the host
// takes this kernel where the subgroup size is 32 (four subgroups of 32), the
// device has VK_KHR_cooperative_matrix and the KV cache is f16 or q8_0 (an
// f32 cache asks for f32 arithmetic: attn_pre) (docs/vulkan.md).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_spirv_intrinsics : enable
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_clustered : enable
#include "common.glsl"
#include "coopmat.glsl"

#define BR 32u            // rows per workgroup
#define BC 32u            // keys per block
#define TPR 4u            // threads per row in the softmax steps (WG / BR)
#define SA (HD / 2u + 4u) // f16 pairs per row of Qs and KVs (16-byte rows, skewed banks)
#define PA (BC / 2u + 4u) // ... of Ps
// O tiles per subgroup (16 rows x HD/2 dims): HD / 32, unrolled by FOR_NO
#define NONE 0xffffffffu
layout(local_size_x = 128) in;

layout(binding = 0) readonly buffer QKV { vec4 qkv4[]; };
// the 16-bit caches only (the Makefile builds _f16 and _q8): kv.glsl's loads
#if !defined(KV_TYPE) || KV_TYPE == 0
#error "flash_attn_cm: built per 16-bit KV type (-DKV_TYPE=1 or 2)"
#endif
#include "kv.glsl"
layout(binding = 3) writeonly buffer Part { float part[]; };
layout(binding = 4) readonly buffer Step { uint step[]; };
layout(binding = 5) writeonly buffer Out { float outv[]; };
layout(binding = 6) readonly buffer Tab { uint tab[]; };

// Mirrors struct fa_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint n_head;
	uint n_kv;
	uint qkv_stride;
	uint window;  // 0 = global layer
	uint n_tok;   // tokens in the step
	float scale;  // 1/sqrt(query_pre_attn_scalar)
	uint tab_off; // paged KV: this layer kind's first table entry (KV_ROW)
	uint tab_mod; // and its entry count
} p;

shared f16vec2 Qs[BR * SA];  // [row][dim pair]
shared f16vec2 KVs[BC * SA]; // the block's keys, then its values: [key][dim pair]
shared float Ss[BR * BC];    // scores [row][key]
shared f16vec2 Ps[BR * PA];  // probabilities [row][key pair]
shared float Cs[4u * 256u];  // per subgroup: one 16x16 tile on its way out
shared float mrow[BR], lrow[BR];
shared uint rpos[BR], rlo[BR], rbase[BR]; // row: position, first visible key, block table (NONE: no token)
shared uint rowk[BC];                     // the block's cache rows (NONE: past the run's keys)

#if HD == 32
#define FOR_NO(X) X(0)
#elif HD == 64
#define FOR_NO(X) X(0) X(1)
#elif HD == 128
#define FOR_NO(X) X(0) X(1) X(2) X(3)
#elif HD == 256
#define FOR_NO(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#endif

// The cache rows of keys [kb, kb + BC) (those past kmax: NONE)
void block_rows(uint tid, uint kb, uint kmax, uint base)
{
	if (tid < BC) {
		uint j = kb + tid;
		rowk[tid] = j <= kmax ? KV_ROW(tab, base, p.tab_off, p.tab_mod, j) : NONE;
	}
}

// The block's keys (v false) or values into KVs as f16, zeros past the keys
void load_block(uint tid, uint kvh, bool v)
{
	uint kvs = p.n_kv * HD;
	for (uint i = tid; i < BC * (HD / 4u); i += 128u) {
		uint c = i / (HD / 4u), d4 = i % (HD / 4u), row = rowk[c];
		vec4 x = vec4(0.0);
		if (row != NONE) {
			uint q = (row * kvs + kvh * HD) / 4u + d4;
			x = v ? VLOAD4(q) : KLOAD4(q);
		}
		KVs[c * SA + 2u * d4] = f16vec2(x.xy);
		KVs[c * SA + 2u * d4 + 1u] = f16vec2(x.zw);
	}
}

// Subgroup sg's 16x16 tile of S = Q K^T (rows 16 (sg & 1).., keys 16 (sg >> 1)..)
void scores(uint sg)
{
	uint rb = sg & 1u, cb = sg >> 1;
	CMC s = cm_fill_c(0.0);
	[[unroll]] for (uint k = 0u; k < HD / 2u; k += 8u) {
		CMA a = cm_load_a(Qs[16u * rb * SA + k], CM_ROW_MAJOR, SA);
		CMB b = cm_load_b(KVs[16u * cb * SA + k], CM_COL_MAJOR, SA);
		s = cm_muladd(a, b, s);
	}
	cm_store_c(Ss[16u * rb * BC + 16u * cb], s, CM_ROW_MAJOR, BC);
}

// The block of keys [kb, kb + BC): its cache rows, its keys in KVs and
// its scores in Ss, ready for every invocation
void block_scores(uint tid, uint sg, uint kvh, uint kb, uint kmax, uint base)
{
	block_rows(tid, kb, kmax, base);
	barrier();
	load_block(tid, kvh, false);
	barrier();
	scores(sg);
	barrier();
}

// Whether row r (in the run [rs, re)) sees key j
bool visible(uint r, uint rs, uint re, uint j)
{
	return r >= rs && r < re && j >= rlo[r] && j <= rpos[r];
}

void main()
{
	uint kvh = gl_WorkGroupID.x, r0 = gl_WorkGroupID.y * BR, sp = gl_WorkGroupID.z, nz = gl_NumWorkGroups.z;
	uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
	uint G = p.n_head / p.n_kv;
	if (tid < BR) {
		uint gr = r0 + tid, t = gr / G;
		bool ok = t < p.n_tok;
		uint pos = ok ? step[STEP_TPOS(t)] : 0u;
		rpos[tid] = pos;
		rlo[tid] = p.window > 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u;
		rbase[tid] = ok ? step[STEP_TBASE(t)] : NONE;
		mrow[tid] = NEG_INF;
		lrow[tid] = 0.0;
	}
	for (uint i = tid; i < BR * (HD / 4u); i += 128u) {
		uint r = i / (HD / 4u), d4 = i % (HD / 4u);
		uint gr = r0 + r, t = gr / G, h = kvh * G + gr % G;
		vec4 q = t < p.n_tok ? qkv4[(t * p.qkv_stride + h * HD) / 4u + d4] * p.scale : vec4(0.0);
		Qs[r * SA + 2u * d4] = f16vec2(q.xy);
		Qs[r * SA + 2u * d4 + 1u] = f16vec2(q.zw);
	}
	barrier();

	// this subgroup's O: rows 16 (sg & 1).., dims dbase..
	uint rb = sg & 1u, dbase = (sg >> 1) * (HD / 2u);
	CMC o[HD / 32];
#define ZERO(i) o[i] = cm_fill_c(0.0);
	FOR_NO(ZERO)
	uint r = tid / TPR, c0 = (tid % TPR) * (BC / TPR); // softmax steps: this thread's row and keys
	uint rs = 0u;
	// rows come token-major and a step's tokens sequence by sequence: the
	// runs of one table are few (every thread reads the same shared values)
	while (rs < BR && rbase[rs] != NONE) {
		uint base = rbase[rs], re = rs + 1u;
		while (re < BR && rbase[re] == base)
			re++;
		uint kmin = NONE, kmax = 0u;
		for (uint i = rs; i < re; i++) {
			kmin = min(kmin, rlo[i]);
			kmax = max(kmax, rpos[i]);
		}
		// blocks at multiples of BC: key j is always in the same block at
		// the same place, and blocks a row does not see add exact zeros, so a
		// row's numbers do not depend on which rows share its tile (a prompt
		// cut into chunks gives the same logits as whole)
		kmin -= kmin % BC;
		kmin += ((sp + nz - kmin / BC % nz) % nz) * BC; // this split's first block
		// pass 1: each row's largest visible score
		for (uint kb = kmin; kb <= kmax; kb += nz * BC) {
			block_scores(tid, sg, kvh, kb, kmax, base);
			float mx = NEG_INF;
			for (uint c = c0; c < c0 + BC / TPR; c++)
				if (visible(r, rs, re, kb + c))
					mx = max(mx, Ss[r * BC + c]);
			mx = subgroupClusteredMax(mx, TPR);
			if (tid % TPR == 0u)
				mrow[r] = max(mrow[r], mx);
			barrier();
		}
		// pass 2: P = exp(S - max), l += P, O += P V
		for (uint kb = kmin; kb <= kmax; kb += nz * BC) {
			block_scores(tid, sg, kvh, kb, kmax, base);
			load_block(tid, kvh, true);
			float m = mrow[r], sum = 0.0;
			for (uint c = c0; c < c0 + BC / TPR; c += 2u) {
				float16_t p0 = float16_t(visible(r, rs, re, kb + c) ? exp(Ss[r * BC + c] - m) : 0.0);
				float16_t p1 = float16_t(visible(r, rs, re, kb + c + 1u) ? exp(Ss[r * BC + c + 1u] - m) : 0.0);
				Ps[r * PA + c / 2u] = f16vec2(p0, p1);
				sum += float(p0) + float(p1);
			}
			sum = subgroupClusteredAdd(sum, TPR);
			if (tid % TPR == 0u)
				lrow[r] += sum;
			barrier();
			[[unroll]] for (uint kc = 0u; kc < BC / 16u; kc++) {
				CMA pa = cm_load_a(Ps[16u * rb * PA + 8u * kc], CM_ROW_MAJOR, PA);
#define PV(i) o[i] = cm_muladd(pa, cm_load_b(KVs[16u * kc * SA + (dbase + 16u * (i)) / 2u], CM_ROW_MAJOR, SA), o[i]);
				FOR_NO(PV)
			}
			barrier();
		}
		rs = re;
	}

	// O / l to out[] (token t, head h: row (t * n_head + h) * HD), or with
	// splits (max, sum, O) to part[] (attn.glsl's layout), each tile through
	// the subgroup's staging area
	if (nz > 1u && tid < BR) {
		uint gr = r0 + tid, t = gr / G;
		if (t < p.n_tok) {
			uint po = ((t * p.n_head + kvh * G + gr % G) * nz + sp) * (HD + 2u);
			part[po] = mrow[tid];
			part[po + 1u] = lrow[tid];
		}
	}
#define OUT(i)                                                                                  \
	cm_store_c(Cs[sg * 256u], o[i], CM_ROW_MAJOR, 16u);                                      \
	subgroupMemoryBarrierShared();                                                           \
	subgroupBarrier();                                                                       \
	for (uint e = lane; e < 256u; e += gl_SubgroupSize) {                                    \
		uint rr = 16u * rb + e / 16u, gr = r0 + rr, t = gr / G, d = dbase + 16u * (i) + e % 16u; \
		uint row = t * p.n_head + kvh * G + gr % G;                                      \
		if (t >= p.n_tok)                                                                \
			continue;                                                                \
		if (nz > 1u)                                                                     \
			part[(row * nz + sp) * (HD + 2u) + 2u + d] = Cs[sg * 256u + e];          \
		else                                                                             \
			outv[row * HD + d] = Cs[sg * 256u + e] / lrow[rr];                       \
	}                                                                                        \
	subgroupBarrier();
	FOR_NO(OUT)
}
