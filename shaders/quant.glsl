// quant.glsl: dequantization from a word buffer `wdata` (declared by the
// includer) at byte offsets. Block layouts follow ggml (spec/reference.md §3).
// All 16-bit fields of every block type sit at even byte offsets, so a 32-bit
// read at an even offset needs at most two words.
#ifndef QUANT_GLSL
#define QUANT_GLSL

uint w_u32_even(uint off)
{
	uint i = off >> 2;
	if ((off & 2u) == 0u)
		return wdata[i];
	return (wdata[i] >> 16) | (wdata[i + 1u] << 16);
}
uint w_u8(uint off) { return (wdata[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }
uint w_u16(uint off) { return (wdata[off >> 2] >> ((off & 2u) * 8u)) & 0xffffu; }
float w_f16(uint off) { return unpackHalf2x16(w_u16(off)).x; }
int w_i8(uint off) { return bitfieldExtract(int(w_u8(off)), 0, 8); }

#if TYPE == TYPE_Q4_0G
// Q4_0 regrouped (gpu_worker/regroup.h): every 8 blocks of a row are one
// 144-byte group, their 8 f16 scales, then two 64-byte halves for blocks
// 4s..4s+3; half s holds quant word q (bytes 4q..4q+3: elements 4q..4q+3 in
// the low nibbles, 16+4q.. in the high ones) of its four blocks side by side
// at 16q, so one 16-byte load gives a word of four blocks.
uint q4g_scale_off(uint roff, uint c) { return roff + (c >> 3) * 144u + 2u * (c & 7u); }
uint q4g_word_off(uint roff, uint c, uint q)
{
	return roff + (c >> 3) * 144u + 16u + 64u * ((c >> 2) & 1u) + 16u * q + 4u * (c & 3u);
}
#endif

#if TYPE == TYPE_Q4_1 || TYPE == TYPE_Q5_0 || TYPE == TYPE_Q5_1
// The 16 nibble bytes of a 32-element block at byte qb: element j < 16 is the
// low nibble of byte j, j + 16 its high nibble; bit 4 of element j is bit j of
// qh (0 for the 4-bit types). w = d * (q - off) + m.
void nib32(uint qb, uint qh, float d, float off, float m, out float w[32])
{
	for (uint k = 0u; k < 4u; k++) {
		uint v = w_u32_even(qb + 4u * k);
		for (uint j = 0u; j < 4u; j++) {
			uint i = 4u * k + j, q = (v >> (8u * j)) & 0xffu;
			uint lo = (q & 15u) | (((qh >> i) & 1u) << 4);
			uint hi = (q >> 4) | (((qh >> (i + 16u)) & 1u) << 4);
			w[i] = d * (float(lo) - off) + m;
			w[i + 16u] = d * (float(hi) - off) + m;
		}
	}
}
#endif

#if TYPE == TYPE_IQ4_NL || TYPE == TYPE_IQ4_XS
// ggml's kvalues_iq4nl. 16 bytes of codes at qb as in nib32, w = d * T[q].
const float IQ4NL[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
				  1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
void iq4_32(uint qb, float d, out float w[32])
{
	for (uint k = 0u; k < 4u; k++) {
		uint v = w_u32_even(qb + 4u * k);
		for (uint j = 0u; j < 4u; j++) {
			uint q = (v >> (8u * j)) & 0xffu;
			w[4u * k + j] = d * IQ4NL[q & 15u];
			w[16u + 4u * k + j] = d * IQ4NL[q >> 4];
		}
	}
}
#endif

#if TYPE == TYPE_Q4_K || TYPE == TYPE_Q5_K
// Sub-block s (0..7) of the 6-bit scales and mins packed at byte sb (Q4_K, Q5_K).
void k4_scale_min(uint sb, uint s, out uint sc, out uint m)
{
	if (s < 4u) {
		sc = w_u8(sb + s) & 63u;
		m = w_u8(sb + 4u + s) & 63u;
	} else {
		sc = (w_u8(sb + 4u + s) & 15u) | ((w_u8(sb + s - 4u) >> 6) << 4);
		m = (w_u8(sb + 4u + s) >> 4) | ((w_u8(sb + s) >> 6) << 4);
	}
}
#endif

#if TYPE == TYPE_Q3_K
// Q3_K scale i (0..15) from the 12 bytes at sb: low 4 bits in byte i (i < 8)
// or the high nibble of byte i - 8, high 2 bits at bit 2 (i / 4) of byte
// 8 + i % 4; stored + 32.
float q3k_scale(uint sb, uint i)
{
	uint lo = i < 8u ? w_u8(sb + i) & 15u : w_u8(sb + i - 8u) >> 4;
	uint hi = (w_u8(sb + 8u + (i & 3u)) >> (2u * (i >> 2))) & 3u;
	return float(int(lo | (hi << 4)) - 32);
}
#endif

// Dequantize elements [32c, 32c+32) of the row starting at byte roff.
void dequant32(uint roff, uint c, out float w[32])
{
#if TYPE == TYPE_F32
	uint b = (roff >> 2) + c * 32u;
	for (uint k = 0u; k < 32u; k++)
		w[k] = uintBitsToFloat(wdata[b + k]);
#elif TYPE == TYPE_F16
	uint b = roff + c * 64u;
	for (uint k = 0u; k < 16u; k++) {
		vec2 h = unpackHalf2x16(w_u32_even(b + 4u * k));
		w[2u * k] = h.x;
		w[2u * k + 1u] = h.y;
	}
#elif TYPE == TYPE_BF16
	uint b = roff + c * 64u;
	for (uint k = 0u; k < 16u; k++) {
		uint v = w_u32_even(b + 4u * k);
		w[2u * k] = uintBitsToFloat(v << 16);
		w[2u * k + 1u] = uintBitsToFloat(v & 0xffff0000u);
	}
#elif TYPE == TYPE_Q8_0
	uint b = roff + c * 34u;
	float d = w_f16(b);
	for (uint k = 0u; k < 8u; k++) {
		int v = int(w_u32_even(b + 2u + 4u * k));
		for (uint j = 0u; j < 4u; j++)
			w[4u * k + j] = d * float(bitfieldExtract(v, int(8u * j), 8));
	}
#elif TYPE == TYPE_Q4_0
	uint b = roff + c * 18u;
	float d = w_f16(b);
	for (uint k = 0u; k < 4u; k++) {
		uint v = w_u32_even(b + 2u + 4u * k);
		for (uint j = 0u; j < 4u; j++) {
			uint q = (v >> (8u * j)) & 0xffu;
			w[4u * k + j] = d * (float(q & 15u) - 8.0);
			w[16u + 4u * k + j] = d * (float(q >> 4) - 8.0);
		}
	}
#elif TYPE == TYPE_Q4_0G
	float d = w_f16(q4g_scale_off(roff, c));
	for (uint k = 0u; k < 4u; k++) {
		uint v = wdata[q4g_word_off(roff, c, k) >> 2];
		for (uint j = 0u; j < 4u; j++) {
			uint q = (v >> (8u * j)) & 0xffu;
			w[4u * k + j] = d * (float(q & 15u) - 8.0);
			w[16u + 4u * k + j] = d * (float(q >> 4) - 8.0);
		}
	}
#elif TYPE == TYPE_Q4_K || TYPE == TYPE_Q5_K
	// Q5_K: Q4_K's scales and nibbles plus a fifth bit, bit s of qh[l]
#if TYPE == TYPE_Q4_K
	uint b = roff + (c >> 3) * 144u, qs0 = 16u;
#else
	uint b = roff + (c >> 3) * 176u, qs0 = 48u;
#endif
	uint s = c & 7u;
	float d = w_f16(b), dmin = w_f16(b + 2u);
	uint sc, m;
	k4_scale_min(b + 4u, s, sc, m);
	float d1 = d * float(sc), m1 = dmin * float(m);
	uint qb = b + qs0 + 32u * (s >> 1);
	uint sh = (s & 1u) * 4u;
	for (uint k = 0u; k < 8u; k++) {
		uint v = w_u32_even(qb + 4u * k) >> sh;
#if TYPE == TYPE_Q5_K
		uint h = w_u32_even(b + 16u + 4u * k) >> s;
#endif
		for (uint j = 0u; j < 4u; j++) {
			uint q = (v >> (8u * j)) & 15u;
#if TYPE == TYPE_Q5_K
			q |= ((h >> (8u * j)) & 1u) << 4;
#endif
			w[4u * k + j] = d1 * float(q) - m1;
		}
	}
#elif TYPE == TYPE_Q6_K
	uint b = roff + (c >> 3) * 210u;
	uint h = (c >> 2) & 1u, g = c & 3u;
	float d = w_f16(b + 208u);
	uint qlo = b + h * 64u + (g & 1u) * 32u;
	uint qho = b + 128u + h * 32u;
	uint nsh = (g >> 1) * 4u;
	float s0 = d * float(w_i8(b + 192u + h * 8u + 2u * g));
	float s1 = d * float(w_i8(b + 192u + h * 8u + 2u * g + 1u));
	for (uint k = 0u; k < 8u; k++) {
		uint vl = w_u32_even(qlo + 4u * k);
		uint vh = w_u32_even(qho + 4u * k);
		for (uint j = 0u; j < 4u; j++) {
			uint ql = (vl >> (8u * j + nsh)) & 15u;
			uint qh = (vh >> (8u * j + 2u * g)) & 3u;
			float q = float(int(ql | (qh << 4)) - 32);
			w[4u * k + j] = (k < 4u ? s0 : s1) * q;
		}
	}
#elif TYPE == TYPE_Q4_1
	uint b = roff + c * 20u;
	vec2 dm = unpackHalf2x16(w_u32_even(b));
	nib32(b + 4u, 0u, dm.x, 0.0, dm.y, w);
#elif TYPE == TYPE_Q5_0
	uint b = roff + c * 22u;
	nib32(b + 6u, w_u32_even(b + 2u), w_f16(b), 16.0, 0.0, w);
#elif TYPE == TYPE_Q5_1
	uint b = roff + c * 24u;
	vec2 dm = unpackHalf2x16(w_u32_even(b));
	nib32(b + 8u, w_u32_even(b + 4u), dm.x, 0.0, dm.y, w);
#elif TYPE == TYPE_IQ4_NL
	uint b = roff + c * 18u;
	iq4_32(b + 2u, w_f16(b), w);
#elif TYPE == TYPE_IQ4_XS
	// sub-block s: 6-bit scale (low 4 bits in nibble s % 2 of scales_l[s / 2],
	// high 2 at bit 2s of scales_h) - 32; codes at qs + 16 s
	uint b = roff + (c >> 3) * 136u;
	uint s = c & 7u;
	uint ls = ((w_u8(b + 4u + (s >> 1)) >> (4u * (s & 1u))) & 15u) | (((w_u16(b + 2u) >> (2u * s)) & 3u) << 4);
	iq4_32(b + 8u + 16u * s, w_f16(b) * float(int(ls) - 32), w);
#elif TYPE == TYPE_Q2_K || TYPE == TYPE_Q3_K
	// elements [32q, 32q + 32) of a block: sub-blocks 2q and 2q + 1 (16 each);
	// the 2-bit codes of element 32q + i at qs[32 (q / 4) + i] >> 2 (q % 4);
	// Q3_K's third bit is bit q of hmask[i]
	uint q = c & 7u;
#if TYPE == TYPE_Q2_K
	uint b = roff + (c >> 3) * 84u;
	vec2 dm = unpackHalf2x16(w_u32_even(b + 80u));
	uint sc2 = w_u16(b + 2u * q);
	vec2 dl = dm.x * vec2(float(sc2 & 15u), float((sc2 >> 8) & 15u));
	vec2 ml = dm.y * vec2(float((sc2 >> 4) & 15u), float(sc2 >> 12));
	uint qb = b + 16u + 32u * (q >> 2);
#else
	uint b = roff + (c >> 3) * 110u;
	float d = w_f16(b + 108u);
	vec2 dl = d * vec2(q3k_scale(b + 96u, 2u * q), q3k_scale(b + 96u, 2u * q + 1u));
	uint qb = b + 32u + 32u * (q >> 2);
#endif
	uint sh = 2u * (q & 3u);
	for (uint k = 0u; k < 8u; k++) {
		uint v = w_u32_even(qb + 4u * k) >> sh;
		uint hf = k >> 2;
#if TYPE == TYPE_Q3_K
		uint h = w_u32_even(b + 4u * k) >> q;
#endif
		for (uint j = 0u; j < 4u; j++) {
			float qv = float((v >> (8u * j)) & 3u);
#if TYPE == TYPE_Q2_K
			w[4u * k + j] = dl[hf] * qv - ml[hf];
#else
			w[4u * k + j] = dl[hf] * (qv - (((h >> (8u * j)) & 1u) != 0u ? 0.0 : 4.0));
#endif
		}
	}
#else
#error unknown TYPE
#endif
}

// One element (float types only; used for rows whose length is not a multiple of 32).
float dequant1(uint roff, uint i)
{
#if TYPE == TYPE_F32
	return uintBitsToFloat(wdata[(roff >> 2) + i]);
#elif TYPE == TYPE_F16
	return w_f16(roff + 2u * i);
#elif TYPE == TYPE_BF16
	return uintBitsToFloat(w_u16(roff + 2u * i) << 16);
#else
	return 0.0;
#endif
}

#endif
