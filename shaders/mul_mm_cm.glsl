// mul_mm_cm.glsl: Y = W X for many token columns (prefill) on matrix cores
// (VK_KHR_cooperative_matrix, 16x16x16 f16 x f16 -> f32, subgroup scope).
// Same bindings and push constants as mul_mm.glsl; the host picks this kernel
// where the device offers such a configuration (docs/vulkan.md).
//
// A workgroup of NSG subgroups computes a tile of BM weight rows x BN tokens
// (128 x 128 with eight subgroups, or 64 x 64 with four: mul_mm_cms_*, for
// products too small to fill the GPU with large tiles). Per K step of BK it
// dequantizes the BM x BK weight tile to f16 in shared memory (one 32-element
// block per thread and pass: shaders/quant.glsl, or a direct q4_0 path whose
// loads are issued a step ahead) and converts the BN x BK slice of X to f16
// next to it (also loaded a step ahead);
// each subgroup then owns a WM x WN corner of the tile as (WM/16) x (WN/16)
// f32 accumulators. At the end every accumulator goes through a per-subgroup
// 16x16 staging area in shared memory to Y with bounds checks (rows past
// nrows_valid get -inf, as in mul_mm).
//
// SPLITK (the _k and _dk variants, built from the same files by the
// Makefile): workgroup z computes only K columns [z * p.tail, (z + 1) *
// p.tail) (tail: a multiple of BK) and writes its partial sums, without
// masking, to part[(z * n_tok + t) * nrows + row] at binding 10; the host
// then runs mm_splitk_reduce, which adds the splits in order. The splits of a
// matrix do not depend on the token count, so a column's numbers do not
// either (engine.c split_k).
//
// The cooperative-matrix types and instructions: coopmat.glsl (loops over
// matrices are unrolled here by macros, so every matrix variable is indexed
// by a constant). The includer defines TYPE (and may set BM, BN, WM, WN).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_spirv_intrinsics : enable
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : enable
#extension GL_KHR_shader_subgroup_basic : enable
#include "common.glsl"

#ifndef BM      // the large tile (engine.h ENGINE_CM_*); mul_mm_cms_* set the small one
#define BM 128  // weight rows per workgroup
#define BN 128  // tokens per workgroup
#define WM 64   // rows per subgroup
#define WN 32   // tokens per subgroup
#endif
#ifndef BK
#define BK 64
#endif
#define SA (BK / 2 + 4) // shared row stride in f16 pairs: 16-byte aligned rows, skewed banks
#define TM (WM / 16)
#define TN (WN / 16)
#define NSG ((BM / WM) * (BN / WN)) // subgroups per workgroup: the host passes NSG x subgroupSize

layout(constant_id = 0) const uint WG = 128;
layout(local_size_x_id = 0) in;

#include "mv_io.glsl"

#include "quant.glsl"

#include "coopmat.glsl"

// Unrolling by macro: X(i) for i < TM, X(i, j) for j < TN.
#if TM == 1
#define FOR_TM(X) X(0)
#elif TM == 2
#define FOR_TM(X) X(0) X(1)
#elif TM == 4
#define FOR_TM(X) X(0) X(1) X(2) X(3)
#endif
#if TN == 1
#define FOR_TN(X) X(0)
#define FOR_TN_OF(X, i) X(i, 0)
#elif TN == 2
#define FOR_TN(X) X(0) X(1)
#define FOR_TN_OF(X, i) X(i, 0) X(i, 1)
#elif TN == 4
#define FOR_TN(X) X(0) X(1) X(2) X(3)
#define FOR_TN_OF(X, i) X(i, 0) X(i, 1) X(i, 2) X(i, 3)
#endif

#ifdef SPLITK
layout(binding = 10) writeonly buffer PartBuf { float part[]; };
#endif
shared f16vec2 As[BM * SA]; // [row][k pair]
shared f16vec2 Bs[BN * SA]; // [token][k pair]
shared float Cs[NSG * 256u]; // per subgroup: one 16x16 accumulator, column-major

// Per thread and K step: NA weight blocks and NX vec4s of X (the last pass
// may be partial), loaded into registers two steps ahead (two sets, R0 and
// R1, taken in turn) so their latency overlaps the products of two steps.
const uint NA = (BM * (BK / 32) + WG - 1) / WG;
const uint NX = (BN * (BK / 4) + WG - 1) / WG;
struct Regs {
#if TYPE == TYPE_Q4_0 || TYPE == TYPE_Q4_0G
	// q4_0: the block's scale (f16 bits) and its 16 packed bytes
	uint d[NA];
	uvec4 q[NA];
#endif
	vec4 x[NX];
};
Regs R0, R1;

// Block i of the step's weight tile: row r = i / (BK/32), 32-element chunk ch.
bool a_block(uint i, uint row0, uint k0, out uint r, out uint ch, out uint c)
{
	r = i / (BK / 32);
	ch = i % (BK / 32);
	c = k0 / 32u + ch;
	return row0 + r < p.nrows && c < p.ncols / 32u;
}

void load_step(uint tid, uint row0, uint t0, uint k0, out Regs R)
{
#if TYPE == TYPE_Q4_0 || TYPE == TYPE_Q4_0G
	[[unroll]] for (uint j = 0u; j < NA; j++) {
		uint r, ch, c;
		R.d[j] = 0u;
		R.q[j] = uvec4(0u);
		if (tid + j * WG < BM * (BK / 32) && a_block(tid + j * WG, row0, k0, r, ch, c)) {
#if TYPE == TYPE_Q4_0G
			uint roff = (row0 + r) * p.row_bytes;
			R.d[j] = w_u16(q4g_scale_off(roff, c));
			[[unroll]] for (uint q = 0u; q < 4u; q++)
				R.q[j][q] = wdata[q4g_word_off(roff, c, q) >> 2];
#else
			uint b = (row0 + r) * p.row_bytes + c * 18u;
			R.d[j] = w_u16(b);
			R.q[j] = uvec4(w_u32_even(b + 2u), w_u32_even(b + 6u), w_u32_even(b + 10u), w_u32_even(b + 14u));
#endif
		}
	}
#endif
	// neighbours read neighbouring vec4s of one token
	[[unroll]] for (uint j = 0u; j < NX; j++) {
		uint i = tid + j * WG;
		uint tok = i / (BK / 4), kk = k0 + 4u * (i % (BK / 4));
		R.x[j] = vec4(0.0);
		if (i < BN * (BK / 4) && t0 + tok < p.n_tok && kk < p.ncols)
			R.x[j] = x4[(p.x_off + (t0 + tok) * p.x_stride + kk) >> 2];
	}
}

// The loaded step to f16 in shared memory (other weight types dequantize here).
void store_step(uint tid, uint row0, uint k0, in Regs R)
{
	[[unroll]] for (uint j = 0u; j < NA; j++) {
		uint i = tid + j * WG;
		if (i >= BM * (BK / 32))
			break;
		uint r = i / (BK / 32), ch = i % (BK / 32);
		uint o = r * SA + ch * 16u;
#if TYPE == TYPE_Q4_0 || TYPE == TYPE_Q4_0G
		float d = unpackHalf2x16(R.d[j]).x;
		[[unroll]] for (uint k = 0u; k < 4u; k++) {
			uint v = R.q[j][k];
			uint lo = v & 0x0f0f0f0fu, hi = (v >> 4) & 0x0f0f0f0fu;
			vec4 l = (vec4(uvec4(lo, lo >> 8, lo >> 16, lo >> 24) & 0xffu) - 8.0) * d;
			vec4 h = (vec4(uvec4(hi, hi >> 8, hi >> 16, hi >> 24) & 0xffu) - 8.0) * d;
			As[o + 2u * k] = f16vec2(l.xy);
			As[o + 2u * k + 1u] = f16vec2(l.zw);
			As[o + 8u + 2u * k] = f16vec2(h.xy);
			As[o + 8u + 2u * k + 1u] = f16vec2(h.zw);
		}
#else
		uint r_, ch_, c; /* r, ch again */
		float wv[32];
		if (a_block(i, row0, k0, r_, ch_, c)) {
			dequant32((row0 + r) * p.row_bytes, c, wv);
		} else {
			[[unroll]] for (uint k = 0u; k < 32u; k++)
				wv[k] = 0.0;
		}
		[[unroll]] for (uint k = 0u; k < 16u; k++)
			As[o + k] = f16vec2(wv[2u * k], wv[2u * k + 1u]);
#endif
	}
	[[unroll]] for (uint j = 0u; j < NX; j++) {
		uint i = tid + j * WG;
		if (i >= BN * (BK / 4))
			break;
		uint o = (i / (BK / 4)) * SA + 2u * (i % (BK / 4));
		Bs[o] = f16vec2(R.x[j].xy);
		Bs[o + 1u] = f16vec2(R.x[j].zw);
	}
}

// One accumulator through the subgroup's staging area to Y: C[m][n] is row
// row0 + m of token t0 + n.
void store_c(CMC v, uint sg, uint lane, uint row0, uint t0)
{
	cm_store_c(Cs[sg * 256u], v, CM_COL_MAJOR, 16u);
	subgroupMemoryBarrierShared();
	subgroupBarrier();
	for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
		uint row = row0 + e % 16u, t = t0 + e / 16u;
#ifdef SPLITK
		if (row < p.nrows && t < p.n_tok)
			part[(gl_WorkGroupID.z * p.n_tok + t) * p.nrows + row] = Cs[sg * 256u + e];
#else
		if (row < p.nrows && t < p.n_tok)
			y[t * p.y_stride + p.y_off + row] = row < p.nrows_valid ? Cs[sg * 256u + e] : NEG_INF;
#endif
	}
	subgroupBarrier();
}

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
	uint row0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
	uint wm = (sg % (BM / WM)) * WM, wn = (sg / (BM / WM)) * WN;
	CMC acc[TM * TN];
	CMA a[TM];
	CMB b[TN];
#define ZERO(i, j) acc[(i) * TN + (j)] = cm_fill_c(0.0);
#define ZERO_ROW(i) FOR_TN_OF(ZERO, i)
	FOR_TM(ZERO_ROW)
#ifdef SPLITK
	uint k_begin = gl_WorkGroupID.z * p.tail, k_end = min(k_begin + p.tail, p.ncols);
#else
	uint k_begin = 0u, k_end = p.ncols;
#endif
#define LOAD_A(i) a[i] = cm_load_a(As[(wm + 16u * (i)) * SA + kk], CM_ROW_MAJOR, SA);
#define LOAD_B(j) b[j] = cm_load_b(Bs[(wn + 16u * (j)) * SA + kk], CM_COL_MAJOR, SA);
#define MMA(i, j) acc[(i) * TN + (j)] = cm_muladd(a[i], b[j], acc[(i) * TN + (j)]);
#define MMA_ROW(i) FOR_TN_OF(MMA, i)
	// 16 k = 8 pairs per product
#define PRODUCTS() \
	[[unroll]] for (uint kk = 0u; kk < BK / 2; kk += 8u) { \
		FOR_TM(LOAD_A) \
		FOR_TN(LOAD_B) \
		FOR_TM(MMA_ROW) \
	}
	// two steps per iteration, one per register set (sets named, not
	// indexed: an indexed set would live in memory)
	load_step(tid, row0, t0, k_begin, R0);
	if (k_begin + BK < k_end)
		load_step(tid, row0, t0, k_begin + BK, R1);
	for (uint k0 = k_begin; k0 < k_end; k0 += 2u * BK) {
		store_step(tid, row0, k0, R0);
		barrier();
		if (k0 + 2u * BK < k_end)
			load_step(tid, row0, t0, k0 + 2u * BK, R0);
		PRODUCTS()
		barrier();
		if (k0 + BK >= k_end)
			break;
		store_step(tid, row0, k0 + BK, R1);
		barrier();
		if (k0 + 3u * BK < k_end)
			load_step(tid, row0, t0, k0 + 3u * BK, R1);
		PRODUCTS()
		barrier();
	}
#define STORE(i, j) store_c(acc[(i) * TN + (j)], sg, lane, row0 + wm + 16u * (i), t0 + wn + 16u * (j));
#define STORE_ROW(i) FOR_TN_OF(STORE, i)
	FOR_TM(STORE_ROW)
}
