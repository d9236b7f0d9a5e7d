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
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#include "common.glsl"

layout(constant_id = 0) const uint WG = 128;
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer WBuf { uint wdata[]; };
layout(binding = 1) readonly buffer XBuf { vec4 x4[]; };
layout(binding = 2) writeonly buffer YBuf { float y[]; };

// Mirrors struct mv_push in gpu_worker/engine.h.
layout(push_constant) uniform Push {
	uint ncols, nrows, row_bytes, x_stride, x_off, y_stride, y_off, n_tok, nrows_valid, tpr;
} p;

#include "quant.glsl"

shared float red[2u * WG];

// Dot product of block c of the row at byte roff with x4[xb4 .. xb4 + 8).
float block_dot(uint roff, uint c, uint xb4)
{
#if TYPE == TYPE_Q4_0
	uint b = roff + c * 18u;
	uint i0 = b >> 2;
	bool odd = (b & 2u) != 0u;
	uint w[5];
	[[unroll]] for (uint k = 0u; k < 5u; k++)
		w[k] = wdata[i0 + k];
	float d = unpackHalf2x16(odd ? (w[0] >> 16) : (w[0] & 0xffffu)).x;
	vec4 s = vec4(0.0), sx = vec4(0.0);
	[[unroll]] for (uint k = 0u; k < 4u; k++) {
		uint q = odd ? w[k + 1u] : ((w[k] >> 16) | (w[k + 1u] << 16));
		vec4 lo = vec4(q & 15u, (q >> 8) & 15u, (q >> 16) & 15u, (q >> 24) & 15u);
		vec4 hi = vec4((q >> 4) & 15u, (q >> 12) & 15u, (q >> 20) & 15u, q >> 28);
		vec4 xa = x4[xb4 + k], xc = x4[xb4 + 4u + k];
		s += lo * xa + hi * xc;
		sx += xa + xc;
	}
	return d * (dot(s, vec4(1.0)) - 8.0 * dot(sx, vec4(1.0)));
#elif TYPE == TYPE_Q8_0
	uint b = roff + c * 34u;
	uint i0 = b >> 2;
	bool odd = (b & 2u) != 0u;
	uint w[9];
	[[unroll]] for (uint k = 0u; k < 9u; k++)
		w[k] = wdata[i0 + k];
	float d = unpackHalf2x16(odd ? (w[0] >> 16) : (w[0] & 0xffffu)).x;
	vec4 s = vec4(0.0);
	[[unroll]] for (uint k = 0u; k < 8u; k++) {
		int q = int(odd ? w[k + 1u] : ((w[k] >> 16) | (w[k + 1u] << 16)));
		vec4 v = vec4(ivec4(q << 24, q << 16, q << 8, q) >> 24);
		s += v * x4[xb4 + k];
	}
	return d * dot(s, vec4(1.0));
#else
	float wv[32];
	dequant32(roff, c, wv);
	vec4 s = vec4(0.0);
	[[unroll]] for (uint k = 0u; k < 8u; k++)
		s += vec4(wv[4u * k], wv[4u * k + 1u], wv[4u * k + 2u], wv[4u * k + 3u]) * x4[xb4 + k];
	return dot(s, vec4(1.0));
#endif
}

#if TYPE == TYPE_Q4_0 || TYPE == TYPE_Q8_0
// Quarter blocks: the work unit is 8 elements of one block, so the threads of a
// row read x (and the packed weights) contiguously: lane k of a block reads x4
// k and k+4 (q4_0) or 2k, 2k+1 (q8_0). Whole-block lanes instead read x 128
// bytes apart, which costs several L1 wavefronts per load instruction.
#define UNIT_ELEMS 8u
float unit_dot(uint roff, uint u, uint xb4)
{
	uint c = u >> 2, q = u & 3u, xc = xb4 + c * 8u;
#if TYPE == TYPE_Q4_0
	uint b = roff + c * 18u;
	float d = unpackHalf2x16(w_u16(b)).x;
	uint v = w_u32_even(b + 2u + 4u * q);
	vec4 lo = vec4(v & 15u, (v >> 8) & 15u, (v >> 16) & 15u, (v >> 24) & 15u);
	vec4 hi = vec4((v >> 4) & 15u, (v >> 12) & 15u, (v >> 20) & 15u, v >> 28);
	return d * (dot(lo - 8.0, x4[xc + q]) + dot(hi - 8.0, x4[xc + 4u + q]));
#else
	uint b = roff + c * 34u;
	float d = unpackHalf2x16(w_u16(b)).x;
	int v0 = int(w_u32_even(b + 2u + 8u * q)), v1 = int(w_u32_even(b + 6u + 8u * q));
	vec4 a0 = vec4(ivec4(v0 << 24, v0 << 16, v0 << 8, v0) >> 24);
	vec4 a1 = vec4(ivec4(v1 << 24, v1 << 16, v1 << 8, v1) >> 24);
	return d * (dot(a0, x4[xc + 2u * q]) + dot(a1, x4[xc + 2u * q + 1u]));
#endif
}
#else
#define UNIT_ELEMS 32u
float unit_dot(uint roff, uint u, uint xb4) { return block_dot(roff, u, xb4 + u * 8u); }
#endif

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
