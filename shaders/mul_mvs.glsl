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
#ifdef X16
#extension GL_EXT_spirv_intrinsics : enable
#endif
#include "common.glsl"

layout(constant_id = 0) const uint WG = 128;
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint NT = 1;  // token columns per workgroup
layout(constant_id = 2) const uint RPT = 1; // rows per thread group

#ifndef GLU
// the norm tail below: compiled into every non-GLU mul_mvs/mul_mvb module and
// chosen at run time (p.tail), so a product's numbers never depend on
// whether its dispatch runs the tail (on lavapipe a module built with it and
// one without it rounded a product differently: the compiler shaped the loop
// apart). GLU modules have no tail; their pipelines still have its bindings.
#define NORM_TAIL 1
#endif
#include "mv_io.glsl"

#include "quant.glsl"

#ifdef NORM_TAIL
// Norm tail (p.tail = 1; decode in the fused forward, after wo and after the
// FFN's down): y is the projection whose post-norm, residual add and next
// pre-norm rmsnorm's mode 3 computes. The last workgroup to finish
// runs that norm on y's rows itself (norm_row.glsl, the code, thread count
// and subgroup reductions of the engine's rmsnorm_sg pipeline then, so the
// rows are bitwise the same):
// one dispatch and one barrier fewer per norm, which on the H100 cost more
// than the norm (1B decode: 52 norms, 4 us each). Each workgroup writes its
// rows, fences, then counts itself in cnt[0]; the one that brings the count
// to the number of workgroups sees every row and resets the count for the
// next dispatch. Rows: y's token rows are y_stride = nrows apart (y_off 0).
layout(constant_id = 3) const uint NPER = 1;      // norm_row's elements per thread
layout(constant_id = 4) const float NEPS = 1e-6;  // the norm's epsilon
layout(binding = 3) buffer HBuf { float h[]; };
layout(binding = 4) readonly buffer NWBuf { float nw[]; };
layout(binding = 5) readonly buffer NW2Buf { float nw2[]; };
layout(binding = 6) writeonly buffer O2Buf { float out2[]; };
layout(binding = 7) coherent buffer CntBuf { uint cnt[]; };
#ifndef X16
// 1: the tail also writes out2's x16 copy (x16.glsl, p.tail bit 1) for the
// x16 kernels that read it next, from its registers as rmsnorm.glsl's
// norm_row does (the same code: the copies are bitwise alike). The x16
// kernels themselves never run a tail.
layout(constant_id = 5) const uint X16T = 0;
layout(binding = 8) writeonly buffer XQOut { uint xqo[]; };
#define X16_OUT(w, v) xqo[w] = (v)
#define X16_SG 1
#endif
// y, h and the weights as vec4s, for norm_row's loads and stores of whole runs
layout(binding = 2) coherent buffer YBuf4 { vec4 y4[]; };
layout(binding = 3) buffer HBuf4 { vec4 h4[]; };
layout(binding = 4) readonly buffer NWBuf4 { vec4 nw4[]; };
layout(binding = 5) readonly buffer NW2Buf4 { vec4 nw24[]; };
layout(binding = 6) writeonly buffer O2Buf4 { vec4 out24[]; };
#define NORM_WG WG
#define NORM_PER NPER
// subgroup reductions, as the engine's rmsnorm_sg at the tail's 128 threads
#define NORM_SG 1
#define NORM_X(i) y[i]
#define NORM_W(i) nw[i]
#define NORM_H(i) h[i]
#define NORM_H_SET(i, v) h[i] = (v)
#define NORM_W2(i) nw2[i]
#define NORM_OUT2_SET(i, v) out2[i] = (v)
#define NORM_X4(i) y4[i]
#define NORM_W4(i) nw4[i]
#define NORM_H4(i) h4[i]
#define NORM_H4_SET(i, v) h4[i] = (v)
#define NORM_W24(i) nw24[i]
#define NORM_OUT24_SET(i, v) out24[i] = (v)
#include "norm_row.glsl"
shared uint nt_last;
#endif

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
// MVS_GENERIC (the _gen pipelines, UNICORN_VK_MVS_GENERIC=1 for A/B): the
// types with fast units below other than q4_0/q8_0 through quant.glsl's
// dequant32, whole blocks per unit (the kernels they had before their fast
// units; q4_0/q8_0 keep theirs, so the knob reproduces the earlier decode).
#if TYPE == TYPE_Q4_0G
#define MVS_Q4G 1
#elif TYPE == TYPE_Q4_0 || TYPE == TYPE_Q8_0 || \
	(!defined(MVS_GENERIC) && (TYPE == TYPE_Q4_1 || TYPE == TYPE_Q5_0 || TYPE == TYPE_Q5_1 || TYPE == TYPE_IQ4_NL || \
				   TYPE == TYPE_IQ4_XS))
#define MVS_QUARTER 1
#elif !defined(MVS_GENERIC) && (TYPE == TYPE_Q4_K || TYPE == TYPE_Q5_K || TYPE == TYPE_Q6_K || TYPE == TYPE_Q3_K)
#define MVS_K16 1
#endif

#if defined(MVS_QUARTER) || defined(MVS_K16) || defined(MVS_Q4G)
// 2^(23-p) + n, n the bits of v under mask << p (p + width(mask) <= 23): n
// becomes a float with one logic operation (no integer-to-float conversion)
float magic(uint v, uint p, uint mask) { return uintBitsToFloat((v & (mask << p)) | ((150u - p) << 23)); }
// The four bytes of v (each < 2^bits, bits <= 7) as floats minus z: magic()
// per byte (the top byte from v >> 8, keeping p + bits <= 23), one exact
// subtraction of the exponents' values and the zero point.
vec4 bytes4(uint v, uint mask, float z)
{
	return vec4(magic(v, 0u, mask), magic(v, 8u, mask), magic(v, 16u, mask), magic(v >> 8, 16u, mask)) -
	       (vec4(8388608.0, 32768.0, 128.0, 128.0) + z);
}
// The 32-bit little-endian value at an even byte offset: one word, or the
// halves of two (Q3_K and Q6_K blocks, 110 and 210 bytes, start on either half of a
// word); selects rather than a branch, so the lanes of a row never diverge.
uint rd32(uint off)
{
	uint i = off >> 2;
	bool odd = (off & 2u) != 0u;
	uint lo = wdata[i], hi = odd ? wdata[i + 1u] : 0u;
	return odd ? (lo >> 16) | (hi << 16) : lo;
}
// The 16-bit value at an even byte offset (one word).
uint rd16(uint off) { return (wdata[off >> 2] >> (8u * (off & 2u))) & 0xffffu; }
// Bit 4 of byte j of the result is bit j of the 4-bit h: the fifth bit of
// four 5-bit codes (Q5_0, Q5_1) next to their nibbles. h * 0x204081 puts bit j
// at 8j (and the other copies where the mask drops them).
uint spread4(uint h) { return ((h * 0x00204081u) & 0x01010101u) << 4; }
#endif

#if defined(MVS_Q4G)
// Regrouped Q4_0 (quant.glsl): the work unit is quant word q of four
// neighbouring blocks, one aligned 16-byte load (the 4-byte reads of 18-byte
// blocks above need two words per quant word, and a thread's registers hold
// a quarter as many weight bytes in flight), and their four scales, one
// 8-byte pair. Lane k of a group of four reads quant word k, so the lanes
// read x as the quarter units do (x4 k and k+4 of each block). The nibbles
// become floats in unit_apply: x-independent and exact, so a column's
// numbers are the same for every NT.
layout(binding = 0) readonly buffer WBuf4 { uvec4 wdata4[]; };
#define UNIT_ELEMS 32u
struct unit_w {
	vec4 d;  // the four blocks' scales
	uvec4 q; // quant word q of each block
};
unit_w unit_load(uint roff, uint u)
{
	uint c = (u >> 2) * 4u, so = q4g_scale_off(roff, c) >> 2;
	unit_w w;
	w.q = wdata4[q4g_word_off(roff, c, u & 3u) >> 4];
	w.d = vec4(unpackHalf2x16(wdata[so]), unpackHalf2x16(wdata[so + 1u]));
	return w;
}
#ifdef X16
// Regrouped Q4_0 against x as 16-bit integers in two bytes (x16.glsl; the
// _x16 kernels, for products whose input rmsnorm wrote): the unit is quant
// word q of four blocks, as above. Per block, four integer dot products of
// four nibbles and four x bytes (nibbles unsigned, x signed: OpSUDot; the hi
// bytes' sum times 256 plus the lo bytes'), plus the lane's correction word,
// are the bits of 1.5 * 2^23 + sum (nibble - 8) q exactly; one subtraction
// makes it a float, scaled by x's d and then by the weights' d. On NVIDIA the
// float unit is bound by its instructions, not by memory; this one issues
// fewer and reads half of x's bytes. The numbers differ from the float
// kernel's by x's rounding to 16 bits; for one column they are the same for
// every NT and RPT, as for the float unit below.
#ifdef FFN_X16
// FFN_X16 (the GLU's _x16q kernel, engine.c "down on x16"): the GLU also
// writes its output row as x16 for down's integer dot-product kernel. A
// block's scale needs 32 rows that 32 / (rows per workgroup) workgroups
// compute, so each row also goes to a mailbox (its bits inverted: 0 means
// not yet written) by a relaxed atomic, and the workgroup that computes a
// group's last row quantizes the group's 128 rows from the mailbox, waiting
// on the atomics of the rows that are still in flight, then empties the
// mailbox for the next dispatch. No workgroup fences or counts (a fence per
// GLU workgroup cost more than down gained, BENCHMARKS.md); one in 128 / rpw
// polls, and only on workgroups with lower ids, which were launched before it
// (dispatch order) and wait for nothing: none can wait on one that has no slot.
layout(binding = 6) writeonly buffer FqOut { uint fq[]; };
layout(binding = 7) coherent buffer Mbox { uint mbox[]; };
#define X16_OUT(w, v) fq[w] = (v)
#define X16_SG 1
#endif
#include "x16.glsl"
layout(binding = 8) readonly buffer XQBuf { uvec4 xq4[]; };
// OpSUDotKHR (4452), packed 4 x 8-bit operands: capabilities DotProduct
// (6019) and DotProductInput4x8BitPacked (6018). Debian 12's glslang has no
// GL_EXT_integer_dot_product, so the instruction is spelled directly.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4452)
int sudot(uint a, uint b, spirv_literal int fmt);
struct unit_xv {
	uvec4 ha, hb, la, lb; // hi and lo bytes of blocks 0, 1 (a) and 2, 3 (b)
	uvec4 c;              // the correction words of the four blocks
	vec4 d;               // x's block scales
};
// xb4: the row's first element / 4 (rows start on a group: x_off and
// x_stride are multiples of X16_GROUP, as the host ensures)
unit_xv unit_x(uint xb4, uint u)
{
	uint b = (xb4 / (X16_GROUP / 4u) + (u >> 2)) * (X16_GROUP_WORDS / 4u), k = u & 3u;
	unit_xv x;
	x.ha = xq4[b + 2u * k];
	x.hb = xq4[b + 2u * k + 1u];
	x.la = xq4[b + 8u + 2u * k];
	x.lb = xq4[b + 8u + 2u * k + 1u];
	x.c = xq4[b + 16u + k];
	x.d = uintBitsToFloat(xq4[b + 20u]);
	return x;
}
// block j of the unit: the hi and lo words of its low and high nibbles
uint x16_block(uint lo, uint hi, uint h0, uint h1, uint l0, uint l1, uint c)
{
	int s = (sudot(h0, lo, 0) + sudot(h1, hi, 0)) * 256 + sudot(l0, lo, 0) + sudot(l1, hi, 0);
	return uint(s) + c;
}
float unit_apply(unit_w w, unit_xv x)
{
	uvec4 lo = w.q & 0x0f0f0f0fu, hi = (w.q >> 4) & 0x0f0f0f0fu;
	uvec4 f = uvec4(x16_block(lo.x, hi.x, x.ha.x, x.ha.y, x.la.x, x.la.y, x.c.x),
			x16_block(lo.y, hi.y, x.ha.z, x.ha.w, x.la.z, x.la.w, x.c.y),
			x16_block(lo.z, hi.z, x.hb.x, x.hb.y, x.lb.x, x.lb.y, x.c.z),
			x16_block(lo.w, hi.w, x.hb.z, x.hb.w, x.lb.z, x.lb.w, x.c.w));
	return dot(w.d, (uintBitsToFloat(f) - uintBitsToFloat(X16_MAGIC)) * x.d);
}
#else
struct unit_xv {
	uint xo; // x4 index of element 4q of the first block (x stays in L1)
};
unit_xv unit_x(uint xb4, uint u) { return unit_xv(xb4 + (u >> 2) * 32u + (u & 3u)); }
float unit_apply(unit_w w, unit_xv x)
{
	vec4 s;
	[[unroll]] for (uint k = 0u; k < 4u; k++) {
		uint v = w.q[k], h = v >> 12;
		vec4 a0 = vec4(magic(v, 0u, 15u), magic(v, 8u, 15u), magic(v, 16u, 15u), magic(h, 12u, 15u)) -
			  vec4(8388616.0, 32776.0, 136.0, 2056.0);
		vec4 a1 = vec4(magic(v, 4u, 15u), magic(v, 12u, 15u), magic(h, 8u, 15u), magic(h, 16u, 15u)) -
			  vec4(524296.0, 2056.0, 32776.0, 136.0);
		s[k] = dot(a0, x4[x.xo + 8u * k]) + dot(a1, x4[x.xo + 8u * k + 4u]);
	}
	return dot(w.d, s);
}
#endif
#elif defined(MVS_QUARTER)
// Quarter blocks: the work unit is 8 elements of one 32-element block (IQ4_XS:
// of one 32-element sub-block, laid out as an IQ4_NL block), so the
// threads of a row read x (and the packed weights) contiguously: lane k of a
// block reads x4 k and k+4 (4- and 5-bit types: the low and high nibbles of
// quant word k) or 2k, 2k+1 (q8_0). Whole-block lanes instead read x 128
// bytes apart, which costs several L1 wavefronts per load instruction.
#define UNIT_ELEMS 8u
#if TYPE == TYPE_Q8_0
#define UNIT_X2 1u  // x4 distance of the second vec4
#else
#define UNIT_X2 4u  // (high nibbles)
#endif
#if TYPE == TYPE_Q4_0 || TYPE == TYPE_IQ4_NL
#define BLOCK_BYTES 18u
#elif TYPE == TYPE_Q8_0
#define BLOCK_BYTES 34u
#elif TYPE == TYPE_Q4_1
#define BLOCK_BYTES 20u
#elif TYPE == TYPE_Q5_0
#define BLOCK_BYTES 22u
#elif TYPE == TYPE_IQ4_XS
#define BLOCK_BYTES 136u // per 8 sub-blocks (unit_load indexes it itself)
#else
#define BLOCK_BYTES 24u
#endif
#if TYPE == TYPE_IQ4_NL || TYPE == TYPE_IQ4_XS
// ggml's kvalues_iq4nl in shared memory (filled at the start of main): a
// constant array indexed by a run-time code may live in local memory
const float IQ4NL_T[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
				    1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
shared float iq4t[16];
#define MVS_INIT()                                          \
	if (gl_LocalInvocationID.x < 16u)                   \
		iq4t[gl_LocalInvocationID.x] = IQ4NL_T[gl_LocalInvocationID.x]; \
	barrier()
vec4 iq4v(uint v) { return vec4(iq4t[v & 15u], iq4t[(v >> 8) & 15u], iq4t[(v >> 16) & 15u], iq4t[(v >> 24) & 15u]); }
#endif
struct unit_w {
	float d;     // the block scale (1 for Q4_1/Q5_1, whose scale and min are in a0, a1)
	vec4 a0, a1; // the unit's two vec4s of weights, unscaled (scaled: Q4_1, Q5_1)
};
struct unit_xv {
	vec4 x0, x1;
};
unit_w unit_load(uint roff, uint u)
{
	uint c = u >> 2, q = u & 3u;
	unit_w w;
#if TYPE == TYPE_IQ4_XS
	// 136-byte blocks (word aligned): d and scales_h, scales_l, then 16
	// code bytes per sub-block s; scale (6 bits: nibble s of scales_l, bits
	// 2s of scales_h) - 32
	uint b = (roff >> 2) + (u >> 5) * 34u, s = c & 7u;
	uint w0 = wdata[b], sl = wdata[b + 1u], v = wdata[b + 2u + (u & 31u)];
	uint ls = ((sl >> (4u * s)) & 15u) | (((w0 >> (16u + 2u * s)) & 3u) << 4);
	w.d = unpackHalf2x16(w0).x * float(int(ls) - 32);
	w.a0 = iq4v(v);
	w.a1 = iq4v(v >> 4);
	return w;
#else
	uint b = roff + c * BLOCK_BYTES;
#if TYPE == TYPE_Q4_0 || TYPE == TYPE_Q8_0 || TYPE == TYPE_IQ4_NL || TYPE == TYPE_Q5_0
	// blocks are 2-byte aligned: a block starting on a word has its quants at
	// 2 mod 4 (each quant word straddles two words), otherwise they are aligned
	bool al = (b & 2u) == 0u;
	uint w0 = wdata[b >> 2];
	w.d = unpackHalf2x16(al ? w0 : w0 >> 16).x;
#endif
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
#elif TYPE == TYPE_Q8_0
	uint qi = (b + 2u + 8u * q) >> 2;
	uint m0 = wdata[qi], m1 = wdata[qi + 1u], m2 = al ? wdata[qi + 2u] : 0u;
	// signed bytes biased to 0..255 (v ^ 0x80), the bias removed with the exponent's value
	uint v0 = (al ? (m0 >> 16) | (m1 << 16) : m0) ^ 0x80808080u;
	uint v1 = (al ? (m1 >> 16) | (m2 << 16) : m1) ^ 0x80808080u;
	uint h0 = v0 >> 16, h1 = v1 >> 16;
	const vec4 bias = vec4(8388736.0, 32896.0, 8388736.0, 32896.0);
	w.a0 = vec4(magic(v0, 0u, 255u), magic(v0, 8u, 255u), magic(h0, 0u, 255u), magic(h0, 8u, 255u)) - bias;
	w.a1 = vec4(magic(v1, 0u, 255u), magic(v1, 8u, 255u), magic(h1, 0u, 255u), magic(h1, 8u, 255u)) - bias;
#elif TYPE == TYPE_IQ4_NL
	// Q4_0's layout: the codes of quant word q at 2 mod 4 when al
	uint qi = (b + 2u + 4u * q) >> 2;
	uint lo = wdata[qi], hi = al ? wdata[qi + 1u] : 0u;
	uint v = al ? (lo >> 16) | (hi << 16) : lo;
	w.a0 = iq4v(v);
	w.a1 = iq4v(v >> 4);
#elif TYPE == TYPE_Q5_0
	// d, then qh (bit j: fifth bit of element j), then the nibbles: d and qh
	// lie in the block's first two words either way; the nibbles at 2 mod 4
	// when al (two words per quant word), else aligned
	uint w1 = wdata[(b >> 2) + 1u];
	uint qh = al ? (w0 >> 16) | (w1 << 16) : w1;
	uint qi = (b >> 2) + 2u + q;
	uint hi = wdata[qi], lo = al ? wdata[qi - 1u] : 0u;
	uint v = al ? (lo >> 16) | (hi << 16) : hi;
	w.a0 = bytes4((v & 0x0f0f0f0fu) | spread4((qh >> (4u * q)) & 15u), 31u, 16.0);
	w.a1 = bytes4(((v >> 4) & 0x0f0f0f0fu) | spread4((qh >> (16u + 4u * q)) & 15u), 31u, 16.0);
#else
	// Q4_1, Q5_1 (4-byte blocks, aligned): d and m, [qh], nibbles; w = d q + m
	// folded into the weights (once per unit, not per token column)
	vec2 dm = unpackHalf2x16(wdata[b >> 2]);
	w.d = 1.0;
#if TYPE == TYPE_Q4_1
	uint v = wdata[(b >> 2) + 1u + q];
	uint l0 = v & 0x0f0f0f0fu, l1 = (v >> 4) & 0x0f0f0f0fu;
#else
	uint qh = wdata[(b >> 2) + 1u], v = wdata[(b >> 2) + 2u + q];
	uint l0 = (v & 0x0f0f0f0fu) | spread4((qh >> (4u * q)) & 15u);
	uint l1 = ((v >> 4) & 0x0f0f0f0fu) | spread4((qh >> (16u + 4u * q)) & 15u);
#endif
	w.a0 = bytes4(l0, 31u, 0.0) * dm.x + dm.y;
	w.a1 = bytes4(l1, 31u, 0.0) * dm.x + dm.y;
#endif
	return w;
#endif
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
#elif defined(MVS_K16)
// K-quant blocks (256 elements) in units of 16: two consecutive quant words
// per thread (neighbouring lanes read neighbouring words and x vec4s), the
// sub-block scales decoded once per unit. Q4_K/Q5_K: words 2p, 2p+1 of the
// 32-byte chunk k hold elements 64k + 8p.. (low nibbles, sub-block 2k) and
// 64k + 32 + 8p.. (high nibbles, sub-block 2k+1); scale and min are folded
// into the weights. Q6_K: in half h, byte l (4i <= l < 4i+4) of ql, ql + 32
// and qh holds elements l, l+32, l+64, l+96, each row of four with its own
// scale (applied per row). Q3_K: in chunk k (0..1), byte l (4i..4i+3) of qs
// holds elements 32q + l of the four q = 4k..4k+3 (2 bits each) whose third
// bit is bit q of hmask[l]; scale 2q + l / 16 per row of four.
#define UNIT_ELEMS 16u
struct unit_w {
	vec4 s;          // per-row scales (1 for Q4_K/Q5_K: folded into a)
	vec4 a0, a1, a2, a3;
};
struct unit_xv {
	vec4 x0, x1, x2, x3;
};
unit_w unit_load(uint roff, uint u)
{
	uint c = u >> 4, r = u & 15u;
	unit_w w;
#if TYPE == TYPE_Q4_K || TYPE == TYPE_Q5_K
	uint k = r >> 2, pw = r & 3u;
#if TYPE == TYPE_Q4_K
	uint b = (roff >> 2) + c * 36u, qs = b + 4u; // in words; 144-byte blocks stay aligned
#else
	uint b = (roff >> 2) + c * 44u, qs = b + 12u;
#endif
	uint q0 = wdata[qs + 8u * k + 2u * pw], q1 = wdata[qs + 8u * k + 2u * pw + 1u];
	vec2 dm = unpackHalf2x16(wdata[b]);
	// 6-bit scales and mins of sub-blocks 2k, 2k+1 as byte pairs (ggml's
	// get_scale_min_k4 for both at once): k < 2 plain 6 bits, k >= 2 a
	// nibble of the last four bytes plus the top 2 bits of the first eight
	uint s0 = wdata[b + 1u], s1 = wdata[b + 2u], s2 = wdata[b + 3u], sh = 16u * (k & 1u);
	uint sc = k < 2u ? (s0 >> sh) & 0x3f3fu : ((s2 >> sh) & 0x0f0fu) | (((s0 >> sh) & 0xc0c0u) >> 2);
	uint mn = k < 2u ? (s1 >> sh) & 0x3f3fu : ((s2 >> (sh + 4u)) & 0x0f0fu) | (((s1 >> sh) & 0xc0c0u) >> 2);
	vec4 sm = vec4(magic(sc, 0u, 255u), magic(sc >> 8, 0u, 255u), magic(mn, 0u, 255u), magic(mn >> 8, 0u, 255u)) -
		  8388608.0;
	vec2 dl = dm.x * sm.xy, ml = dm.y * sm.zw;
	uint l0 = q0 & 0x0f0f0f0fu, l1 = q1 & 0x0f0f0f0fu, h0 = (q0 >> 4) & 0x0f0f0f0fu, h1 = (q1 >> 4) & 0x0f0f0f0fu;
#if TYPE == TYPE_Q5_K
	// fifth bit: bit s of qh[l] for sub-block s (qh words 2p, 2p+1 hold l = 8p..8p+7)
	uint e0 = wdata[b + 4u + 2u * pw], e1 = wdata[b + 5u + 2u * pw];
	l0 |= ((e0 >> (2u * k)) & 0x01010101u) << 4;
	l1 |= ((e1 >> (2u * k)) & 0x01010101u) << 4;
	h0 |= ((e0 >> (2u * k + 1u)) & 0x01010101u) << 4;
	h1 |= ((e1 >> (2u * k + 1u)) & 0x01010101u) << 4;
#endif
	w.s = vec4(1.0);
	w.a0 = bytes4(l0, 31u, 0.0) * dl.x - ml.x;
	w.a1 = bytes4(l1, 31u, 0.0) * dl.x - ml.x;
	w.a2 = bytes4(h0, 31u, 0.0) * dl.y - ml.y;
	w.a3 = bytes4(h1, 31u, 0.0) * dl.y - ml.y;
#elif TYPE == TYPE_Q6_K
	uint h = r >> 3, i = r & 7u;
	uint b = roff + c * 210u;
	uint v0 = rd32(b + 64u * h + 4u * i), v1 = rd32(b + 64u * h + 32u + 4u * i), e = rd32(b + 128u + 32u * h + 4u * i);
	// int8 scales of rows l, l+32, l+64, l+96: bytes is, is+2, is+4, is+6 at 192 + 8h
	uint sa = rd32(b + 192u + 8u * h), sb = rd32(b + 196u + 8u * h), ss = 8u * (i >> 2);
	float d = unpackHalf2x16(rd16(b + 208u)).x; // the last field: no read past the block
	w.s = d * vec4(bitfieldExtract(int(sa), int(ss), 8), bitfieldExtract(int(sa), int(ss + 16u), 8),
		       bitfieldExtract(int(sb), int(ss), 8), bitfieldExtract(int(sb), int(ss + 16u), 8));
	w.a0 = bytes4((v0 & 0x0f0f0f0fu) | ((e & 0x03030303u) << 4), 63u, 32.0);
	w.a1 = bytes4((v1 & 0x0f0f0f0fu) | (((e >> 2) & 0x03030303u) << 4), 63u, 32.0);
	w.a2 = bytes4(((v0 >> 4) & 0x0f0f0f0fu) | (((e >> 4) & 0x03030303u) << 4), 63u, 32.0);
	w.a3 = bytes4(((v1 >> 4) & 0x0f0f0f0fu) | (((e >> 6) & 0x03030303u) << 4), 63u, 32.0);
#else // Q3_K
	uint k = r >> 3, i = r & 7u;
	uint b = roff + c * 110u;
	uint v = rd32(b + 32u + 32u * k + 4u * i), e = rd32(b + 4u * i) >> (4u * k);
	float d = unpackHalf2x16(rd16(b + 108u)).x;
	// scale j (0..15) = 6 bits - 32: low 4 in byte j (j < 8) or the high
	// nibble of byte j - 8, high 2 at bit 2 (j / 4) of byte 8 + j % 4; this
	// unit's rows q = 4k..4k+3 take j = 2q + i / 4 = 8k + 2t + i / 4
	uint s0 = rd32(b + 96u), s1 = rd32(b + 100u), s8 = rd32(b + 104u);
	vec4 sv;
	[[unroll]] for (uint t = 0u; t < 4u; t++) {
		uint j = 8u * k + 2u * t + (i >> 2), bj = j & 7u;
		uint lo = ((bj < 4u ? s0 : s1) >> (8u * (bj & 3u) + 4u * k)) & 15u;
		uint hi = (s8 >> (8u * (j & 3u) + 2u * (j >> 2))) & 3u;
		sv[t] = float(int(lo | (hi << 4)) - 32);
	}
	w.s = d * sv;
	// 3-bit code | (hmask bit << 2) - 4: 2 low bits then the high bit
	w.a0 = bytes4((v & 0x03030303u) | ((e & 0x01010101u) << 2), 7u, 4.0);
	w.a1 = bytes4(((v >> 2) & 0x03030303u) | (((e >> 1) & 0x01010101u) << 2), 7u, 4.0);
	w.a2 = bytes4(((v >> 4) & 0x03030303u) | (((e >> 2) & 0x01010101u) << 2), 7u, 4.0);
	w.a3 = bytes4(((v >> 6) & 0x03030303u) | (((e >> 3) & 0x01010101u) << 2), 7u, 4.0);
#endif
	return w;
}
unit_xv unit_x(uint xb4, uint u)
{
	uint c = u >> 4, r = u & 15u;
	unit_xv x;
#if TYPE == TYPE_Q4_K || TYPE == TYPE_Q5_K
	// elements 64k + 8p (two vec4s), 64k + 32 + 8p (two more)
	uint xo = xb4 + 64u * c + 16u * (r >> 2) + 2u * (r & 3u);
	x.x0 = x4[xo];
	x.x1 = x4[xo + 1u];
	x.x2 = x4[xo + 8u];
	x.x3 = x4[xo + 9u];
#else
	// elements 32q + 4i, q = 4k + t (Q6_K: 128h + 4i + 32t, the same words)
	uint xo = xb4 + 64u * c + 32u * (r >> 3) + (r & 7u);
	x.x0 = x4[xo];
	x.x1 = x4[xo + 8u];
	x.x2 = x4[xo + 16u];
	x.x3 = x4[xo + 24u];
#endif
	return x;
}
float unit_apply(unit_w w, unit_xv x)
{
#if TYPE == TYPE_Q4_K || TYPE == TYPE_Q5_K
	return (dot(w.a0, x.x0) + dot(w.a1, x.x1)) + (dot(w.a2, x.x2) + dot(w.a3, x.x3));
#else
	return dot(w.s, vec4(dot(w.a0, x.x0), dot(w.a1, x.x1), dot(w.a2, x.x2), dot(w.a3, x.x3)));
#endif
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

#ifndef MVS_INIT
#define MVS_INIT()
#endif

#ifdef FFN_X16
// bound on a quantizer's polls: a device that broke dispatch order would give
// NaN rows (a mailbox word never written reads as NaN), not a hung GPU
#define FQ_POLLS (1u << 22)
// row of token t, as the mailbox holds it (never 0: NaN bits stay NaN)
void ffn_x16_post(uint t, uint row, float v)
{
	uint w = ~floatBitsToUint(v);
	atomicExchange(mbox[t * p.nrows + row], w == 0u ? 0x00400000u : w);
}
// Every thread of the workgroup (uniform control flow: the shuffles). The
// host runs this kernel only where nrows is whole x16 groups and the rows
// per workgroup divide X16_GROUP; x16 rows are nrows elements long, one per
// token. Threads 0..31 take run tid of the group (x16.glsl: the eight runs of
// block m lie in threads 8m..8m+7, a lane's two runs in neighbours).
void ffn_x16_group()
{
	uint rpw = (WG / p.tpr) * RPT;
	uint last = (gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y + 1u) * rpw - 1u;
	if ((last & (X16_GROUP - 1u)) != X16_GROUP - 1u || last >= p.nrows)
		return;
	// this workgroup's own rows first: a device may run its subgroups one
	// after another between barriers (lavapipe), and a poll would then wait
	// for a row that a later subgroup posts
	barrier();
	uint tid = gl_LocalInvocationID.x, g = last / X16_GROUP;
	bool on = tid < 32u;
	for (uint j = 0u; j < NT; j++) {
		uint t = gl_WorkGroupID.x * NT + j;
		if (t >= p.n_tok)
			break;
		uint mb = t * p.nrows + g * X16_GROUP + x16_run_elem(on ? tid : 0u);
		uvec4 s = uvec4(on ? 0u : 1u);
		for (uint n = 0u; on && n < FQ_POLLS && any(equal(s, uvec4(0u))); n++)
			[[unroll]] for (uint k = 0u; k < 4u; k++)
				if (s[k] == 0u)
					s[k] = atomicOr(mbox[mb + k], 0u);
		if (on)
			[[unroll]] for (uint k = 0u; k < 4u; k++)
				atomicExchange(mbox[mb + k], 0u);
		uint w0 = t * (p.nrows / X16_GROUP) * X16_GROUP_WORDS;
		x16_run_copy(w0, g * 32u + (on ? tid : 0u), uintBitsToFloat(~s), on, 1u);
	}
}
#endif

void main()
{
	MVS_INIT();
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
			if (lane == 0u && row < p.nrows && t0 + j < p.n_tok) {
				y[(t0 + j) * p.y_stride + p.y_off + row] = row < p.nrows_valid ? v : NEG_INF;
#ifdef FFN_X16
				ffn_x16_post(t0 + j, row, v);
#endif
			}
		}
#ifdef FFN_X16
	ffn_x16_group();
#endif
#ifdef NORM_TAIL
	if (p.tail == 0u)
		return;
	memoryBarrierBuffer();
	barrier();
	if (tid == 0u)
		nt_last = atomicAdd(cnt[0], 1u) == gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z - 1u ? 1u : 0u;
	barrier();
	if (nt_last == 0u)
		return;
	memoryBarrierBuffer();
#ifndef X16
	bool xq = X16T != 0u && (p.tail & 2u) != 0u;
#else
	bool xq = false;
#endif
	for (uint t = 0u; t < p.n_tok; t++)
		norm_row(t * p.nrows, p.nrows, 3u, NEPS, xq);
	if (tid == 0u)
		atomicExchange(cnt[0], 0u);
#endif
}
