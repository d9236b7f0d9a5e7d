#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/quant.h"

/* Q4_K/Q5_K 6-bit scale packing with sub-block j: scale j+1, min j. */
static void pack_scales_j(uint8_t scales[12])
{
	for (int j = 0; j < 4; j++) {
		scales[j] = (uint8_t)(j + 1);
		scales[j + 4] = (uint8_t)j;
	}
	for (int j = 4; j < 8; j++)
		scales[j + 4] = (uint8_t)((j + 1) | (j << 4));
}

Test(quant, half_floats)
{
	/* exact values and rounding cases checked by hand against IEEE binary16 */
	cr_assert_eq(quant_f32_to_f16(1.0f), 0x3c00);
	cr_assert_eq(quant_f32_to_f16(-2.0f), 0xc000);
	cr_assert_eq(quant_f32_to_f16(65504.0f), 0x7bff);
	cr_assert_eq(quant_f32_to_f16(65520.0f), 0x7c00);      /* rounds up to inf */
	cr_assert_eq(quant_f32_to_f16(5.9604645e-8f), 0x0001); /* smallest subnormal */
	cr_assert_eq(quant_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00); /* tie -> even */
	cr_assert_eq(quant_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02); /* tie -> even (up) */
	cr_assert_eq(quant_f16_to_f32(0x3555), 0.333251953125f);
	cr_assert_eq(quant_f16_to_f32(0x0001), 5.9604645e-8f);
	cr_assert(isinf(quant_f16_to_f32(0xfc00)) && quant_f16_to_f32(0xfc00) < 0);
	cr_assert(isnan(quant_f16_to_f32(quant_f32_to_f16(NAN))));
	for (uint32_t h = 0; h < 0x7c00; h++) /* every finite half round-trips */
		cr_assert_eq(quant_f32_to_f16(quant_f16_to_f32((uint16_t)h)), h, "half %#x", h);
	cr_assert_eq(quant_f32_to_bf16(1.0f), 0x3f80);
	cr_assert_eq(quant_bf16_to_f32(0x4049), 3.140625f);
	cr_assert_eq(quant_f32_to_bf16(1.00390625f), 0x3f80); /* tie -> even */
	cr_assert(isnan(quant_bf16_to_f32(quant_f32_to_bf16(NAN))));
}

Test(quant, row_bytes_and_types)
{
	uint64_t b;
	cr_assert_eq(quant_row_bytes(TENSOR_Q4_0, 64, &b), 0);
	cr_assert_eq(b, 36);
	cr_assert_eq(quant_row_bytes(TENSOR_Q6_K, 512, &b), 0);
	cr_assert_eq(b, 420);
	cr_assert_eq(quant_row_bytes(TENSOR_Q8_0, 33, &b), ERR_INVAL);
	cr_assert(strstr(err_msg(), "multiple of the q8_0 block size 32"));
	cr_assert_eq(quant_row_bytes(TENSOR_F32, UINT64_MAX / 2, &b), ERR_RANGE);
	cr_assert_eq(quant_row_bytes(16, 256, &b), ERR_UNSUP); /* IQ2_XXS: not supported */
	cr_assert(strstr(err_msg(), "IQ2_XXS (type 16)"), "%s", err_msg());
	uint32_t t;
	cr_assert_eq(quant_type_parse("Q4_K", &t), 0);
	cr_assert_eq(t, TENSOR_Q4_K);
	cr_assert_eq(quant_type_parse("q5_1", &t), 0);
	cr_assert_eq(t, TENSOR_Q5_1);
	cr_assert_eq(quant_type_parse("IQ4_XS", &t), 0);
	cr_assert_eq(t, TENSOR_IQ4_XS);
	cr_assert_eq(quant_type_parse("iq2_xxs", &t), ERR_UNSUP);
	cr_assert(strstr(err_msg(), "iq4_nl"), "%s", err_msg());
	cr_assert_eq(quant_row_bytes(TENSOR_Q5_K, 512, &b), 0);
	cr_assert_eq(b, 352);
	cr_assert_eq(quant_row_bytes(TENSOR_IQ4_NL, 64, &b), 0);
	cr_assert_eq(b, 36);
	cr_assert_eq(quant_row_bytes(TENSOR_Q2_K, 128, &b), ERR_INVAL);
}

Test(quant, type_names)
{
	/* The hand-kept list in errors names exactly the types type_table runs. */
	const char *list = quant_supported_list();
	size_t names_len = 0;
	for (uint32_t t = 0; t < 64; t++) {
		const char *gn = quant_ggml_type_name(t);
		if (!quant_type_info(t))
			continue;
		cr_assert(gn, "runnable type %u has no ggml name", t);
		char want[32];
		snprintf(want, sizeof want, "%s", gn);
		const char *at = strstr(list, want);
		cr_assert(at && (at[strlen(want)] == ',' || at[strlen(want)] == 0), "'%s' missing in '%s'", gn, list);
		names_len += strlen(gn) + 2;
	}
	cr_assert_eq(names_len, strlen(list) + 2, "extra names in '%s'", list);
	cr_assert_str_eq(quant_ggml_type_name(16), "IQ2_XXS");
	cr_assert_str_eq(quant_ggml_type_name(6), "Q5_0");
	cr_assert_str_eq(quant_ggml_type_name(39), "MXFP4");
	cr_assert_null(quant_ggml_type_name(4)); /* removed Q4_2 */
	cr_assert_null(quant_ggml_type_name(40));
	cr_assert_null(quant_ggml_type_name(UINT32_MAX));
}

Test(quant, known_blocks)
{
	struct block_q4_0 q4 = { .d = 0x3c00 /* 1.0 */ };
	for (int j = 0; j < 16; j++)
		q4.qs[j] = (uint8_t)(j | ((15 - j) << 4));
	float y[256];
	cr_assert_eq(quant_dequantize(TENSOR_Q4_0, &q4, y, 32), 0);
	for (int j = 0; j < 16; j++) {
		cr_assert_eq(y[j], (float)(j - 8));
		cr_assert_eq(y[j + 16], (float)(7 - j));
	}
	struct block_q8_0 q8 = { .d = 0x3800 /* 0.5 */ };
	for (int j = 0; j < 32; j++)
		q8.qs[j] = (int8_t)(j * 4 - 64);
	cr_assert_eq(quant_dequantize(TENSOR_Q8_0, &q8, y, 32), 0);
	for (int j = 0; j < 32; j++)
		cr_assert_eq(y[j], 0.5f * (j * 4 - 64));
	/* Q6_K: scale index e/16 within each half, value d*sc*(q-32); all q = 33 -> d*sc */
	struct block_q6_k q6;
	memset(&q6, 0, sizeof q6);
	q6.d = 0x3c00;
	for (int j = 0; j < 16; j++)
		q6.scales[j] = (int8_t)(j - 8);
	memset(q6.ql, 0x11, sizeof q6.ql); /* low nibbles 1 */
	memset(q6.qh, 0xAA, sizeof q6.qh); /* high bits 2 -> q = 1 | 2<<4 = 33 */
	cr_assert_eq(quant_dequantize(TENSOR_Q6_K, &q6, y, 256), 0);
	for (int e = 0; e < 256; e++)
		cr_assert_eq(y[e], (float)(e / 16 - 8), "e=%d", e);
	/* Q4_K: sub-block j has scale j+1 and min j; q = 3 everywhere */
	struct block_q4_k qk;
	memset(&qk, 0, sizeof qk);
	qk.d = 0x3c00;
	qk.dmin = 0x3800; /* 0.5 */
	pack_scales_j(qk.scales);
	memset(qk.qs, 0x33, sizeof qk.qs);
	cr_assert_eq(quant_dequantize(TENSOR_Q4_K, &qk, y, 256), 0);
	for (int e = 0; e < 256; e++)
		cr_assert_eq(y[e], 3.0f * (e / 32 + 1) - 0.5f * (e / 32), "e=%d", e);
}

static const int8_t iq4nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

Test(quant, known_blocks_32)
{
	float y[32];
	/* codes: element j < 16 is the low nibble of qs[j], j + 16 the high nibble */
	struct block_q4_1 q41 = { .d = 0x3c00 /* 1 */, .m = 0xc000 /* -2 */ };
	for (int j = 0; j < 16; j++)
		q41.qs[j] = (uint8_t)(j | ((15 - j) << 4));
	cr_assert_eq(quant_dequantize(TENSOR_Q4_1, &q41, y, 32), 0);
	for (int j = 0; j < 16; j++) {
		cr_assert_eq(y[j], (float)(j - 2));
		cr_assert_eq(y[j + 16], (float)(13 - j));
	}
	/* Q5_0: bit 4 of element j is bit j of the little-endian qh */
	struct block_q5_0 q50 = { .d = 0x3800 /* 0.5 */, .qh = { 0x01, 0x80, 0x02, 0x40 } };
	for (int j = 0; j < 16; j++)
		q50.qs[j] = (uint8_t)(j | ((15 - j) << 4));
	cr_assert_eq(quant_dequantize(TENSOR_Q5_0, &q50, y, 32), 0);
	for (int j = 0; j < 32; j++) {
		int hi = j == 0 || j == 15 || j == 17 || j == 30; /* bits 0, 15, 17, 30 */
		int lo = j < 16 ? j : 31 - j;
		cr_assert_eq(y[j], 0.5f * (lo + 16 * hi - 16), "j=%d", j);
	}
	struct block_q5_1 q51 = { .d = 0x4000 /* 2 */, .m = 0x3c00, .qh = { 0, 0, 0, 0x80 } };
	for (int j = 0; j < 16; j++)
		q51.qs[j] = (uint8_t)(j | ((15 - j) << 4));
	cr_assert_eq(quant_dequantize(TENSOR_Q5_1, &q51, y, 32), 0);
	for (int j = 0; j < 32; j++)
		cr_assert_eq(y[j], 2.0f * ((j < 16 ? j : 31 - j) + (j == 31 ? 16 : 0)) + 1, "j=%d", j);
	struct block_iq4_nl nl = { .d = 0xc000 /* -2 */ };
	for (int j = 0; j < 16; j++)
		nl.qs[j] = (uint8_t)(j | ((15 - j) << 4));
	cr_assert_eq(quant_dequantize(TENSOR_IQ4_NL, &nl, y, 32), 0);
	for (int j = 0; j < 16; j++) {
		cr_assert_eq(y[j], -2.0f * iq4nl[j]);
		cr_assert_eq(y[j + 16], -2.0f * iq4nl[15 - j]);
	}
}

/* Element positions of the 2-bit codes in Q2_K and Q3_K (ggml's
 * dequantize_row_q2_K order): byte b of qs, shift s -> element. */
static const int k2_pos[][3] = { { 0, 0, 0 }, { 16, 0, 16 }, { 0, 2, 32 }, { 5, 6, 101 }, { 31, 6, 127 },
				 { 32, 0, 128 }, { 40, 4, 200 }, { 63, 6, 255 } };

/* y[e] == v and every other of the 256 values == rest */
static void only_at(const float *y, int e, float v, float rest)
{
	for (int i = 0; i < 256; i++)
		cr_assert_eq(y[i], i == e ? v : rest, "element %d: %g (expected %g at %d)", i, y[i], v, e);
}

/* For each (byte, shift, element) of pos: field (len bytes of the block blk)
 * all zero but code << shift at byte; element gets v, every other rest. */
static void check_codes(uint32_t type, const void *blk, uint8_t *field, size_t len, const int (*pos)[3], size_t n,
			int code, float v, float rest)
{
	float y[256];
	for (size_t k = 0; k < n; k++) {
		memset(field, 0, len);
		field[pos[k][0]] = (uint8_t)(code << pos[k][1]);
		cr_assert_eq(quant_dequantize(type, blk, y, 256), 0);
		only_at(y, pos[k][2], v, rest);
	}
}
#define NPOS(a) (sizeof(a) / sizeof(a)[0])

Test(quant, known_blocks_q2_k_q3_k)
{
	float y[256];
	struct block_q2_k q2;
	memset(&q2, 0, sizeof q2);
	q2.d = 0x3c00;
	memset(q2.scales, 1, sizeof q2.scales); /* scale 1, min 0 */
	check_codes(TENSOR_Q2_K, &q2, q2.qs, sizeof q2.qs, k2_pos, NPOS(k2_pos), 2, 2.0f, 0.0f);
	/* sub-block s of 16: scale s (low nibble), min s % 3 (high nibble) */
	q2.dmin = 0x3800;
	for (int s = 0; s < 16; s++)
		q2.scales[s] = (uint8_t)(s | ((s % 3) << 4));
	memset(q2.qs, 0xFF, sizeof q2.qs);
	cr_assert_eq(quant_dequantize(TENSOR_Q2_K, &q2, y, 256), 0);
	for (int e = 0; e < 256; e++)
		cr_assert_eq(y[e], 3.0f * (e / 16) - 0.5f * (e / 16 % 3), "e=%d", e);

	struct block_q3_k q3;
	memset(&q3, 0, sizeof q3);
	q3.d = 0x3c00;
	/* all 16 scales 33 - 32 = 1: low 4 bits 1 in each nibble of bytes 0..7,
	 * high 2 bits 2 in each pair of bytes 8..11 */
	memset(q3.scales, 0x11, 8);
	memset(q3.scales + 8, 0xAA, 4);
	memset(q3.hmask, 0xFF, sizeof q3.hmask); /* high bit set: no -4 */
	check_codes(TENSOR_Q3_K, &q3, q3.qs, sizeof q3.qs, k2_pos, NPOS(k2_pos), 3, 3.0f, 0.0f);
	/* the high bit of element e: bit e / 32 of hmask[e % 32]; clear means -4 */
	static const int hm[][3] = { { 0, 0, 0 }, { 17, 0, 17 }, { 3, 1, 35 }, { 5, 4, 133 }, { 31, 7, 255 } };
	memset(q3.qs, 0, sizeof q3.qs);
	check_codes(TENSOR_Q3_K, &q3, q3.hmask, sizeof q3.hmask, hm, NPOS(hm), 1, 0.0f, -4.0f);
	/* scale i stored as u = 4i + 3: low 4 bits in byte i (i < 8) or the high
	 * nibble of byte i - 8, high 2 bits in byte 8 + i % 4 at bit 2 (i / 4) */
	memset(q3.scales, 0, sizeof q3.scales);
	for (int i = 0; i < 16; i++) {
		int u = 4 * i + 3;
		q3.scales[i < 8 ? i : i - 8] |= (uint8_t)((u & 15) << (i < 8 ? 0 : 4));
		q3.scales[8 + i % 4] |= (uint8_t)((u >> 4) << (2 * (i / 4)));
	}
	memset(q3.hmask, 0xFF, sizeof q3.hmask);
	memset(q3.qs, 0x55, sizeof q3.qs); /* code 1 everywhere */
	cr_assert_eq(quant_dequantize(TENSOR_Q3_K, &q3, y, 256), 0);
	for (int e = 0; e < 256; e++)
		cr_assert_eq(y[e], (float)(4 * (e / 16) + 3 - 32), "e=%d", e);
}

Test(quant, known_blocks_q5_k_iq4_xs)
{
	float y[256];
	struct block_q5_k q5;
	memset(&q5, 0, sizeof q5);
	q5.d = 0x3c00;
	memset(q5.scales, 1, 4);     /* sub-blocks 0..3: scale 1, min 0 */
	memset(q5.scales + 8, 1, 4); /* 4..7 */
	/* nibbles: byte b, shift s -> element; the 5th bit: qh[l] bit k -> element 32k + l */
	static const int nib[][3] = { { 0, 0, 0 }, { 0, 4, 32 }, { 31, 4, 63 }, { 32, 0, 64 }, { 100, 4, 228 }, { 127, 4, 255 } };
	check_codes(TENSOR_Q5_K, &q5, q5.qs, sizeof q5.qs, nib, NPOS(nib), 5, 5.0f, 0.0f);
	static const int hb[][3] = { { 0, 0, 0 }, { 5, 3, 101 }, { 31, 7, 255 } };
	memset(q5.qs, 0, sizeof q5.qs);
	check_codes(TENSOR_Q5_K, &q5, q5.qh, sizeof q5.qh, hb, NPOS(hb), 1, 16.0f, 0.0f);
	/* Q4_K's scale packing: sub-block j has scale j+1 and min j; q = 3 + 16 */
	q5.dmin = 0x3800;
	pack_scales_j(q5.scales);
	memset(q5.qs, 0x33, sizeof q5.qs);
	memset(q5.qh, 0xFF, sizeof q5.qh);
	cr_assert_eq(quant_dequantize(TENSOR_Q5_K, &q5, y, 256), 0);
	for (int e = 0; e < 256; e++)
		cr_assert_eq(y[e], 19.0f * (e / 32 + 1) - 0.5f * (e / 32), "e=%d", e);

	/* IQ4_XS: sub-block s scale (s + 33) - 32 = s + 1: low 4 bits s + 1 in
	 * nibble s % 2 of scales_l[s / 2], high 2 bits 2 at bit 2s of scales_h */
	struct block_iq4_xs xs;
	memset(&xs, 0, sizeof xs);
	xs.d = 0x3800;
	for (int k = 0; k < 4; k++)
		xs.scales_l[k] = (uint8_t)((2 * k + 1) | ((2 * k + 2) << 4));
	xs.scales_h = 0xAAAA;
	for (int s = 0; s < 8; s++)
		for (int j = 0; j < 16; j++)
			xs.qs[16 * s + j] = (uint8_t)(j | ((15 - j) << 4));
	cr_assert_eq(quant_dequantize(TENSOR_IQ4_XS, &xs, y, 256), 0);
	for (int s = 0; s < 8; s++)
		for (int j = 0; j < 16; j++) {
			cr_assert_eq(y[32 * s + j], 0.5f * (s + 1) * iq4nl[j], "s=%d j=%d", s, j);
			cr_assert_eq(y[32 * s + 16 + j], 0.5f * (s + 1) * iq4nl[15 - j], "s=%d j=%d", s, j);
		}
}

static float rms_err(uint32_t type, const float *x, int n)
{
	uint64_t bytes;
	cr_assert_eq(quant_row_bytes(type, (uint64_t)n, &bytes), 0);
	void *q = malloc(bytes);
	float *y = malloc(sizeof(float) * (size_t)n);
	cr_assert_eq(quant_quantize(type, x, q, (uint64_t)n), 0);
	cr_assert_eq(quant_dequantize(type, q, y, (uint64_t)n), 0);
	double e = 0, s = 0;
	for (int i = 0; i < n; i++) {
		e += (double)(x[i] - y[i]) * (x[i] - y[i]);
		s += (double)x[i] * x[i];
	}
	free(q);
	free(y);
	return (float)sqrt(e / s);
}

Test(quant, quantize_roundtrip_error)
{
	enum { N = 4096 };
	static float x[N];
	srand(7);
	for (int i = 0; i < N; i++)
		x[i] = ((float)rand() / RAND_MAX - 0.5f) * (1 + (i % 97) / 10.0f);
	/* relative RMS error bounds per format (uniform data): a broken packing gives ~1 */
	cr_assert_lt(rms_err(TENSOR_F32, x, N), 1e-9f);
	cr_assert_lt(rms_err(TENSOR_F16, x, N), 1e-3f);
	cr_assert_lt(rms_err(TENSOR_BF16, x, N), 5e-3f);
	cr_assert_lt(rms_err(TENSOR_Q8_0, x, N), 0.01f);
	cr_assert_lt(rms_err(TENSOR_Q6_K, x, N), 0.03f);
	cr_assert_lt(rms_err(TENSOR_Q4_0, x, N), 0.12f);
	cr_assert_lt(rms_err(TENSOR_Q4_K, x, N), 0.12f);
	/* measured 0.070, 0.037, 0.034, 0.068 (4 and 5 bits: step / sqrt(12) of the range) */
	cr_assert_lt(rms_err(TENSOR_Q4_1, x, N), 0.08f);
	cr_assert_lt(rms_err(TENSOR_Q5_0, x, N), 0.045f);
	cr_assert_lt(rms_err(TENSOR_Q5_1, x, N), 0.045f);
	cr_assert_lt(rms_err(TENSOR_IQ4_NL, x, N), 0.08f);
	/* measured 0.304, 0.138, 0.034, 0.069 */
	cr_assert_lt(rms_err(TENSOR_Q2_K, x, N), 0.34f);
	cr_assert_lt(rms_err(TENSOR_Q3_K, x, N), 0.16f);
	cr_assert_lt(rms_err(TENSOR_Q5_K, x, N), 0.045f);
	cr_assert_lt(rms_err(TENSOR_IQ4_XS, x, N), 0.08f);
}

/* All-zero input: every type gives exact zeros (no NaN from a zero scale). */
Test(quant, quantize_zeros)
{
	static float x[512], y[512];
	static uint8_t q[4096];
	for (uint32_t t = 0; t < 64; t++) {
		if (!quant_type_info(t))
			continue;
		for (int i = 0; i < 512; i++)
			y[i] = 1;
		cr_assert_eq(quant_quantize(t, x, q, 512), 0);
		cr_assert_eq(quant_dequantize(t, q, y, 512), 0);
		for (int i = 0; i < 512; i++)
			cr_assert_eq(y[i], 0.0f, "%s [%d] = %g", quant_type_info(t)->name, i, y[i]);
	}
}

/* The quantizers' binary search for the nearest IQ4 level agrees with trying
 * every level: on a dense sweep of [-160, 160] and 1/64 apart, on every
 * midpoint and the floats right beside it (ties go to the lower level in
 * both), on tiny and large magnitudes and on random values. */
Test(quant, iq4_nearest_matches_exhaustive)
{
	for (int i = -160 * 64; i <= 160 * 64; i++) {
		float v = i / 64.0f;
		cr_assert_eq(quant_iq4_nearest(v), quant_iq4_nearest_exhaustive(v), "v=%.9g", v);
	}
	for (int k = 0; k < 15; k++) {
		float m = (iq4nl[k] + iq4nl[k + 1]) / 2.0f;
		const float vs[3] = { nextafterf(m, -1e9f), m, nextafterf(m, 1e9f) };
		for (int j = 0; j < 3; j++)
			cr_assert_eq(quant_iq4_nearest(vs[j]), quant_iq4_nearest_exhaustive(vs[j]), "v=%.9g", vs[j]);
		cr_assert_eq(quant_iq4_nearest(m), k, "midpoint %g goes to the lower level", m);
	}
	/* (not beyond ~1e7: there the exhaustive search's distances round equal
	 * and it answers level 0; the quantizers only ask about |v| <= 135) */
	const float edge[] = { 0.0f, -0.0f, 1e-30f, -1e-30f, 1e6f, -1e6f, 127.0f, -127.0f, 113.0f, -200.0f, 200.0f };
	for (size_t j = 0; j < sizeof edge / sizeof edge[0]; j++)
		cr_assert_eq(quant_iq4_nearest(edge[j]), quant_iq4_nearest_exhaustive(edge[j]), "v=%.9g", edge[j]);
	srand(11);
	for (int i = 0; i < 200000; i++) {
		float v = ((float)rand() / RAND_MAX - 0.5f) * 300.0f;
		cr_assert_eq(quant_iq4_nearest(v), quant_iq4_nearest_exhaustive(v), "v=%.9g", v);
	}
}
