// mul_mvs.glsl: y = W x for single token columns (decode), bandwidth-oriented.
// A group of tpr threads (power of two, chosen by the host) shares RPT
// consecutive weight rows (RPT a specialization constant; GLU: their gate and
// up rows); each thread walks work units of those rows (whole 32-element
// blocks, or for q4_0/q8_0 quarter blocks so that neighbouring threads read
// neighbouring words), loads each unit's x once and applies it to all RPT
// rows (x is read from L1 once per RPT rows instead of once per row: at copy
// bandwidth the fp32 x stream is 7x the q4_0 weight stream), and reads the
// packed weights as aligned 32-bit words. q4_0/q8_0 turn quants into floats
// without integer-to-float conversions (a quarter-rate instruction on NVIDIA):
// the nibble or byte is masked into the mantissa of a float whose exponent
// makes it an integer (magic()), and one subtraction removes the exponent's
// value and the zero point (both exact, so the weights are bitwise those of
// an int-to-float conversion).
// Reduction: subgroupShuffleXor inside a subgroup when tpr <= subgroup size,
// else subgroupAdd then shared memory across the row's subgroups. This assumes
// the usual linear mapping of a 1-D workgroup onto subgroups (consecutive
// local ids share a subgroup), true on NVIDIA, AMD, Intel and lavapipe.
// Requires ncols % 32 == 0 and x_off, x_stride multiples of 4 (the host falls
// back to mul_mv otherwise). The includer defines TYPE (and GLU: rows r and
// r+nrows of W are gate and up).
//
// Token columns: workgroup x covers NT token columns (a specialization
// constant: 1 for mul_mvs, the token group for the batch kernels
// mul_mvb[_glu]_<type>) and each weight unit is loaded and unpacked once for
// all of them. Every column gets bitwise what the kernel gives that token
// alone, whatever NT and RPT: floating-point results differ only if the
// operations or their order differ, or if the compiler shapes them
// differently (a*b+c contracted into an FMA in one kernel and not the other).
// Per (column, row) the kernel performs the same operations in the same order
// for every NT and RPT: the host passes the same tpr, so lanes and units per
// thread match; units are taken two per iteration in the same c/c2 order and
// added as acc += a + b; the reduction is the same. The float work on x is one
// function, unit_apply; unit_load and unit_x hold only loads, integer work and
// the x-independent conversions, so neither NT nor RPT can change a column's
// expression tree. Columns past n_tok in the last group compute on the last
// token's x and are not stored; rows past nrows in the last row group compute
// on the last row and are not stored. gl_WorkGroupID.x is the token group: the
// workgroups of one row group for every token group are adjacent in dispatch
// order, so weights read once hit the cache for the other groups.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#include "common.glsl"

layout(constant_id = 0) const uint WG = 128;
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint NT = 1;  // token columns per workgroup
layout(constant_id = 2) const uint RPT = 1; // rows per thread group

#include "mv_io.glsl"

#include "quant.glsl"

#ifdef GLU
#define NRW 2u // weight rows per output row: gate, up
#else
#define NRW 1u
#endif
// accumulator slot of (column j, half h, row r); every slot has its own
// reduction slots in red[]
#define SLOT(j, h, r) (((j) * NRW + (h)) * RPT + (r))
shared float red[NT * NRW * RPT * WG];

// A work unit is split into unit_load (the weights of one row: loads and
// unpacking, no use of x), unit_x (the unit's x of one column: loads only) and
// unit_apply (every floating-point operation that involves x).
#if TYPE == TYPE_Q4_0 || TYPE == TYPE_Q8_0
// Quarter blocks: the work unit is 8 elements of one block, so the threads of a
// row read x (and the packed weights) contiguously: lane k of a block reads x4
// k and k+4 (q4_0) or 2k, 2k+1 (q8_0). Whole-block lanes instead read x 128
// bytes apart, which costs several L1 wavefronts per load instruction.
#define UNIT_ELEMS 8u
#if TYPE == TYPE_Q4_0
#define UNIT_X2 4u  // x4 distance of the second vec4 (high nibbles)
#define BLOCK_BYTES 18u
#else
#define UNIT_X2 1u
#define BLOCK_BYTES 34u
#endif
struct unit_w {
	float d;
	vec4 a0, a1;  // dequantized but unscaled weights of the unit's two vec4s
};
struct unit_xv {
	vec4 x0, x1;
};
// 2^(23-p) + n, n the bits of v under mask << p (p + width(mask) <= 23): n
// becomes a float with one logic operation (no integer-to-float conversion)
float magic(uint v, uint p, uint mask) { return uintBitsToFloat((v & (mask << p)) | ((150u - p) << 23)); }
unit_w unit_load(uint roff, uint u)
{
	uint c = u >> 2, q = u & 3u;
	unit_w w;
	// blocks are 2-byte aligned: a block starting on a word has its quants at
	// 2 mod 4 (each quant word straddles two words), otherwise they are aligned
	uint b = roff + c * BLOCK_BYTES;
	bool al = (b & 2u) == 0u;
	uint w0 = wdata[b >> 2];
	w.d = unpackHalf2x16(al ? w0 : w0 >> 16).x;
#if TYPE == TYPE_Q4_0
	uint qi = (b + 2u + 4u * q) >> 2;
	uint lo = wdata[qi], hi = al ? wdata[qi + 1u] : 0u;
	uint v = al ? (lo >> 16) | (hi << 16) : lo;
	// byte j: element 4q+j in the low nibble, 16+4q+j in the high one
	uint h = v >> 12;
	w.a0 = vec4(magic(v, 0u, 15u), magic(v, 8u, 15u), magic(v, 16u, 15u), magic(h, 12u, 15u)) -
	       vec4(8388616.0, 32776.0, 136.0, 2056.0);
	w.a1 = vec4(magic(v, 4u, 15u), magic(v, 12u, 15u), magic(h, 8u, 15u), magic(h, 16u, 15u)) -
	       vec4(524296.0, 2056.0, 32776.0, 136.0);
#else
	uint qi = (b + 2u + 8u * q) >> 2;
	uint m0 = wdata[qi], m1 = wdata[qi + 1u], m2 = al ? wdata[qi + 2u] : 0u;
	// signed bytes biased to 0..255 (v ^ 0x80), the bias removed with the exponent's value
	uint v0 = (al ? (m0 >> 16) | (m1 << 16) : m0) ^ 0x80808080u;
	uint v1 = (al ? (m1 >> 16) | (m2 << 16) : m1) ^ 0x80808080u;
	uint h0 = v0 >> 16, h1 = v1 >> 16;
	const vec4 bias = vec4(8388736.0, 32896.0, 8388736.0, 32896.0);
	w.a0 = vec4(magic(v0, 0u, 255u), magic(v0, 8u, 255u), magic(h0, 0u, 255u), magic(h0, 8u, 255u)) - bias;
	w.a1 = vec4(magic(v1, 0u, 255u), magic(v1, 8u, 255u), magic(h1, 0u, 255u), magic(h1, 8u, 255u)) - bias;
#endif
	return w;
}
unit_xv unit_x(uint xb4, uint u)
{
	uint xo = xb4 + (u >> 2) * 8u + (u & 3u) * (UNIT_X2 == 1u ? 2u : 1u);
	unit_xv x;
	x.x0 = x4[xo];
	x.x1 = x4[xo + UNIT_X2];
	return x;
}
float unit_apply(unit_w w, unit_xv x)
{
	return w.d * (dot(w.a0, x.x0) + dot(w.a1, x.x1));
}
#else
#define UNIT_ELEMS 32u
struct unit_w {
	float v[32];
};
// x stays in memory (L1) for whole-block units: 8 more vec4 registers per
// unit would cost occupancy
struct unit_xv {
	uint xo;
};
unit_w unit_load(uint roff, uint u)
{
	unit_w w;
	dequant32(roff, u, w.v);
	return w;
}
unit_xv unit_x(uint xb4, uint u) { return unit_xv(xb4 + u * 8u); }
float unit_apply(unit_w w, unit_xv x)
{
	vec4 s = vec4(0.0);
	[[unroll]] for (uint k = 0u; k < 8u; k++)
		s += vec4(w.v[4u * k], w.v[4u * k + 1u], w.v[4u * k + 2u], w.v[4u * k + 3u]) * x4[x.xo + k];
	return dot(s, vec4(1.0));
}
#endif

void main()
{
	uint tid = gl_LocalInvocationID.x;
	uint lane = tid % p.tpr;
	uint row0 = ((gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) * (WG / p.tpr) + tid / p.tpr) * RPT;
	uint t0 = gl_WorkGroupID.x * NT;
	bool live = row0 < p.nrows && row0 < p.nrows_valid;
	uint nb = live ? p.ncols / UNIT_ELEMS : 0u;  // work units in a row
	uint xb4[NT];
	uint roff[NRW * RPT];
	float acc[NT * NRW * RPT];
	[[unroll]] for (uint j = 0u; j < NT; j++) {
		// columns past n_tok (last group) read the last token's x, which
		// stays in bounds; their results are not stored
		uint t = min(t0 + j, p.n_tok - 1u);
		xb4[j] = (p.x_off + t * p.x_stride) >> 2;
	}
	[[unroll]] for (uint h = 0u; h < NRW; h++)
		[[unroll]] for (uint r = 0u; r < RPT; r++)
			roff[h * RPT + r] = live ? (min(row0 + r, p.nrows - 1u) + h * p.nrows) * p.row_bytes : 0u;
	[[unroll]] for (uint s = 0u; s < NT * NRW * RPT; s++)
		acc[s] = 0.0;
	// Two units per iteration: both units' loads are issued before either is
	// used, so each thread keeps twice the bytes in flight (decode matvecs are
	// latency-bound: the whole matrix is only a few memory round trips deep).
	uint c = lane;
	for (; c + p.tpr < nb; c += 2u * p.tpr) {
		uint c2 = c + p.tpr;
		unit_w wa[NRW * RPT], wb[NRW * RPT];
		[[unroll]] for (uint k = 0u; k < NRW * RPT; k++) {
			wa[k] = unit_load(roff[k], c);
			wb[k] = unit_load(roff[k], c2);
		}
		[[unroll]] for (uint j = 0u; j < NT; j++) {
			unit_xv xa = unit_x(xb4[j], c), xb = unit_x(xb4[j], c2);
			[[unroll]] for (uint k = 0u; k < NRW * RPT; k++) {
				float a = unit_apply(wa[k], xa);
				float b = unit_apply(wb[k], xb);
				acc[j * NRW * RPT + k] += a + b;
			}
		}
	}
	if (c < nb) {
		unit_w wa[NRW * RPT];
		[[unroll]] for (uint k = 0u; k < NRW * RPT; k++)
			wa[k] = unit_load(roff[k], c);
		[[unroll]] for (uint j = 0u; j < NT; j++) {
			unit_xv xa = unit_x(xb4[j], c);
			[[unroll]] for (uint k = 0u; k < NRW * RPT; k++)
				acc[j * NRW * RPT + k] += unit_apply(wa[k], xa);
		}
	}
	// Sum every slot over the tpr threads of its row group; valid in lane 0.
	if (p.tpr <= gl_SubgroupSize) {
		[[unroll]] for (uint s = 0u; s < NT * NRW * RPT; s++)
			for (uint m = p.tpr >> 1; m > 0u; m >>= 1)
				acc[s] += subgroupShuffleXor(acc[s], m);
	} else {
		[[unroll]] for (uint s = 0u; s < NT * NRW * RPT; s++) {
			float v = subgroupAdd(acc[s]);
			if (subgroupElect())
				red[s * WG + gl_SubgroupID] = v;
		}
		barrier();
		uint per = p.tpr / gl_SubgroupSize, first = (tid / p.tpr) * per;
		[[unroll]] for (uint s = 0u; s < NT * NRW * RPT; s++) {
			float v = 0.0;
			if (lane == 0u)
				for (uint k = 0u; k < per; k++)
					v += red[s * WG + first + k];
			acc[s] = v;
		}
	}
	[[unroll]] for (uint j = 0u; j < NT; j++)
		[[unroll]] for (uint r = 0u; r < RPT; r++) {
			uint row = row0 + r;
			float v = acc[SLOT(j, 0u, r)];
#ifdef GLU
			v = gelu_tanh(v) * acc[SLOT(j, 1u, r)];
#endif
			if (lane == 0u && row < p.nrows && t0 + j < p.n_tok)
				y[(t0 + j) * p.y_stride + p.y_off + row] = row < p.nrows_valid ? v : NEG_INF;
		}
}
