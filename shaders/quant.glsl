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
#elif TYPE == TYPE_Q4_K
	uint b = roff + (c >> 3) * 144u;
	uint s = c & 7u;
	float d = w_f16(b), dmin = w_f16(b + 2u);
	uint sc, m;
	if (s < 4u) {
		sc = w_u8(b + 4u + s) & 63u;
		m = w_u8(b + 8u + s) & 63u;
	} else {
		sc = (w_u8(b + 8u + s) & 15u) | ((w_u8(b + s) >> 6) << 4);
		m = (w_u8(b + 8u + s) >> 4) | ((w_u8(b + 4u + s) >> 6) << 4);
	}
	float d1 = d * float(sc), m1 = dmin * float(m);
	uint qb = b + 16u + 32u * (s >> 1);
	uint sh = (s & 1u) * 4u;
	for (uint k = 0u; k < 8u; k++) {
		uint v = w_u32_even(qb + 4u * k) >> sh;
		for (uint j = 0u; j < 4u; j++)
			w[4u * k + j] = d1 * float((v >> (8u * j)) & 15u) - m1;
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
