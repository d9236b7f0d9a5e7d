// mul_mvs.glsl: y = W x for single token columns (decode), bandwidth-oriented.
// A group of tpr threads (power of two, chosen by the host) shares one weight
// row; each thread walks whole 32-element blocks of that row, reading the
// packed block as aligned 32-bit words (no per-byte loads) and x as vec4.
// Reduction: subgroupShuffleXor inside a subgroup when tpr <= subgroup size,
// else subgroupAdd then shared memory across the row's subgroups. This assumes
// the usual linear mapping of a 1-D workgroup onto subgroups (consecutive
// local ids share a subgroup), true on NVIDIA, AMD, Intel and lavapipe.
// gl_WorkGroupID.x is the token column: the workgroups of one row group for
// every token of a batch are adjacent in dispatch order, so the batch reads a
// weight row from memory once and the other tokens hit the cache, while each
// column runs exactly the code a lone token runs (bitwise identical results,
// which the coordinator's per-sequence replay relies on). Requires ncols % 32 == 0 and
// x_off, x_stride multiples of 4 (the host falls back to mul_mv otherwise).
// The includer defines TYPE (and GLU: rows r and r+nrows of W are gate and up).
//
// MVS_BATCH (mul_mvb[_glu]_<type>, batch steps of n >= NT tokens): workgroup x
// covers NT token columns and each weight unit is loaded and unpacked once for
// all of them, while every column gets bitwise what mul_mvs gives that token
// alone. Argument: floating-point results differ only if the operations or
// their order differ, or if the compiler shapes them differently (a*b+c
// contracted into an FMA in one kernel and not the other). Per column the
// batch main performs the operations of main() in the same order: the host
// passes mul_mvs's tpr, so rows, lanes and units per thread match; units are
// taken two per iteration in the same c/c2 order and added as acc += a + b;
// row_sum is the same function (each column has its own shared-memory slots).
// The float work on x is one function, unit_apply, that both kernels call
// (mul_mvs as unit_apply(unit_load(..))); unit_load holds only integer work
// and the x-independent conversions, so sharing it cannot change a column's
// expression tree, and the compiler sees the same shapes in both kernels.
// (The refactor into unit_load/unit_apply left mul_mvs's optimized SPIR-V
// unchanged.) Columns past n_tok in the last group compute on the last
// token's x and are not stored.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#include "common.glsl"

layout(constant_id = 0) const uint WG = 128;
layout(local_size_x_id = 0) in;

#include "mv_io.glsl"

#include "quant.glsl"

#ifdef MVS_BATCH
// Token columns per workgroup (batch kernel); every column has its own
// reduction slots so that one row_sum's readers never race the next's writers.
layout(constant_id = 1) const uint NT = 4;
shared float red[2u * NT * WG];
#else
shared float red[2u * WG];
#endif

// A work unit is split into unit_load (the weights: loads and unpacking, no
// use of x) and unit_apply (every floating-point operation that involves x).
// mul_mvs runs unit_apply(unit_load(..), xb4) per unit; the batch kernel runs
// unit_load once and unit_apply once per token column. Both kernels thus reach
// each token's numbers through the same source expressions in the same order,
// so the shader compiler sees the same operation shapes (including any a*b+c
// it contracts into an FMA) and a token's result is bitwise the same.
#if TYPE == TYPE_Q4_0 || TYPE == TYPE_Q8_0
// Quarter blocks: the work unit is 8 elements of one block, so the threads of a
// row read x (and the packed weights) contiguously: lane k of a block reads x4
// k and k+4 (q4_0) or 2k, 2k+1 (q8_0). Whole-block lanes instead read x 128
// bytes apart, which costs several L1 wavefronts per load instruction.
#define UNIT_ELEMS 8u
#if TYPE == TYPE_Q4_0
#define UNIT_X2 4u  // x4 distance of the second vec4 (high nibbles)
#else
#define UNIT_X2 1u
#endif
struct unit_w {
	float d;
	vec4 a0, a1;  // dequantized but unscaled weights of the unit's two vec4s
	uint xo;      // x4 index of a0's vec4 relative to the token's xb4
};
unit_w unit_load(uint roff, uint u)
{
	uint c = u >> 2, q = u & 3u;
	unit_w w;
#if TYPE == TYPE_Q4_0
	uint b = roff + c * 18u;
	w.d = unpackHalf2x16(w_u16(b)).x;
	uint v = w_u32_even(b + 2u + 4u * q);
	vec4 lo = vec4(v & 15u, (v >> 8) & 15u, (v >> 16) & 15u, (v >> 24) & 15u);
	vec4 hi = vec4((v >> 4) & 15u, (v >> 12) & 15u, (v >> 20) & 15u, v >> 28);
	w.a0 = lo - 8.0;
	w.a1 = hi - 8.0;
	w.xo = c * 8u + q;
#else
	uint b = roff + c * 34u;
	w.d = unpackHalf2x16(w_u16(b)).x;
	int v0 = int(w_u32_even(b + 2u + 8u * q)), v1 = int(w_u32_even(b + 6u + 8u * q));
	w.a0 = vec4(ivec4(v0 << 24, v0 << 16, v0 << 8, v0) >> 24);
	w.a1 = vec4(ivec4(v1 << 24, v1 << 16, v1 << 8, v1) >> 24);
	w.xo = c * 8u + 2u * q;
#endif
	return w;
}
float unit_apply(unit_w w, uint xb4)
{
	return w.d * (dot(w.a0, x4[xb4 + w.xo]) + dot(w.a1, x4[xb4 + w.xo + UNIT_X2]));
}
#else
#define UNIT_ELEMS 32u
struct unit_w {
	float v[32];
	uint xo;
};
unit_w unit_load(uint roff, uint u)
{
	unit_w w;
	dequant32(roff, u, w.v);
	w.xo = u * 8u;
	return w;
}
float unit_apply(unit_w w, uint xb4)
{
	vec4 s = vec4(0.0);
	[[unroll]] for (uint k = 0u; k < 8u; k++)
		s += vec4(w.v[4u * k], w.v[4u * k + 1u], w.v[4u * k + 2u], w.v[4u * k + 3u]) * x4[xb4 + w.xo + k];
	return dot(s, vec4(1.0));
}
#endif
float unit_dot(uint roff, uint u, uint xb4) { return unit_apply(unit_load(roff, u), xb4); }

// Sum v over the tpr threads of each row; the result is valid in lane 0.
float row_sum(float v, uint slot)
{
	uint tid = gl_LocalInvocationID.x;
	if (p.tpr <= gl_SubgroupSize) {
		for (uint m = p.tpr >> 1; m > 0u; m >>= 1)
			v += subgroupShuffleXor(v, m);
		return v;
	}
	v = subgroupAdd(v);
	if (subgroupElect())
		red[slot * WG + gl_SubgroupID] = v;
	barrier();
	uint per = p.tpr / gl_SubgroupSize, first = (tid / p.tpr) * per;
	float s = 0.0;
	if (tid % p.tpr == 0u)
		for (uint k = 0u; k < per; k++)
			s += red[slot * WG + first + k];
	return s;
}

#ifndef MVS_BATCH
void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint lane = tid % p.tpr;
	uint row = (gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) * (WG / p.tpr) + tid / p.tpr;
	uint t = gl_WorkGroupID.x;
	bool live = row < p.nrows && row < p.nrows_valid;
	uint nb = live ? p.ncols / UNIT_ELEMS : 0u;  // work units in the row
	uint xb4 = (p.x_off + t * p.x_stride) >> 2;
	uint roff = live ? row * p.row_bytes : 0u;
	float acc = 0.0;
#ifdef GLU
	uint roff2 = live ? (row + p.nrows) * p.row_bytes : 0u;
	float acc2 = 0.0;
#endif
	// Two blocks per iteration: both blocks' loads are issued before either is
	// used, so each thread keeps twice the bytes in flight (decode matvecs are
	// latency-bound: the whole matrix is only a few memory round trips deep).
	uint c = lane;
	for (; c + p.tpr < nb; c += 2u * p.tpr) {
		uint c2 = c + p.tpr;
		float a = unit_dot(roff, c, xb4);
		float b = unit_dot(roff, c2, xb4);
		acc += a + b;
#ifdef GLU
		float a2 = unit_dot(roff2, c, xb4);
		float b2 = unit_dot(roff2, c2, xb4);
		acc2 += a2 + b2;
#endif
	}
	if (c < nb) {
		acc += unit_dot(roff, c, xb4);
#ifdef GLU
		acc2 += unit_dot(roff2, c, xb4);
#endif
	}
	acc = row_sum(acc, 0u);
#ifdef GLU
	acc2 = row_sum(acc2, 1u);
	acc = gelu_tanh(acc) * acc2;
#endif
	if (lane == 0u && row < p.nrows)
		y[t * p.y_stride + p.y_off + row] = row < p.nrows_valid ? acc : NEG_INF;
}
#else
// Batch kernel (mul_mvb[_glu]_<type>): workgroup x covers token columns
// [NT x, NT x + NT); each unit's weights are loaded once and applied to all
// of them. Per column everything else is main() above: the same row/lane
// mapping and units per thread (the host passes mul_mvs's tpr), the same
// unit_apply per unit, the same acc += a + b order, the same row_sum.
void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint lane = tid % p.tpr;
	uint row = (gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) * (WG / p.tpr) + tid / p.tpr;
	uint t0 = gl_WorkGroupID.x * NT;
	bool live = row < p.nrows && row < p.nrows_valid;
	uint nb = live ? p.ncols / UNIT_ELEMS : 0u;
	uint roff = live ? row * p.row_bytes : 0u;
	uint xb4[NT];
	float acc[NT];
#ifdef GLU
	uint roff2 = live ? (row + p.nrows) * p.row_bytes : 0u;
	float acc2[NT];
#endif
	[[unroll]] for (uint j = 0u; j < NT; j++) {
		// columns past n_tok (last group) read the last token's x, which
		// stays in bounds; their results are not stored
		uint t = min(t0 + j, p.n_tok - 1u);
		xb4[j] = (p.x_off + t * p.x_stride) >> 2;
		acc[j] = 0.0;
#ifdef GLU
		acc2[j] = 0.0;
#endif
	}
	uint c = lane;
	for (; c + p.tpr < nb; c += 2u * p.tpr) {
		uint c2 = c + p.tpr;
		unit_w wa = unit_load(roff, c), wb = unit_load(roff, c2);
#ifdef GLU
		unit_w wa2 = unit_load(roff2, c), wb2 = unit_load(roff2, c2);
#endif
		[[unroll]] for (uint j = 0u; j < NT; j++) {
			float a = unit_apply(wa, xb4[j]);
			float b = unit_apply(wb, xb4[j]);
			acc[j] += a + b;
#ifdef GLU
			float a2 = unit_apply(wa2, xb4[j]);
			float b2 = unit_apply(wb2, xb4[j]);
			acc2[j] += a2 + b2;
#endif
		}
	}
	if (c < nb) {
		unit_w wa = unit_load(roff, c);
#ifdef GLU
		unit_w wa2 = unit_load(roff2, c);
#endif
		[[unroll]] for (uint j = 0u; j < NT; j++) {
			acc[j] += unit_apply(wa, xb4[j]);
#ifdef GLU
			acc2[j] += unit_apply(wa2, xb4[j]);
#endif
		}
	}
	[[unroll]] for (uint j = 0u; j < NT; j++) {
		float r = row_sum(acc[j], 2u * j);
#ifdef GLU
		float r2 = row_sum(acc2[j], 2u * j + 1u);
		r = gelu_tanh(r) * r2;
#endif
		if (lane == 0u && row < p.nrows && t0 + j < p.n_tok)
			y[(t0 + j) * p.y_stride + p.y_off + row] = row < p.nrows_valid ? r : NEG_INF;
	}
}
#endif
