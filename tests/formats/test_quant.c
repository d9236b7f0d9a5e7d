#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/quant.h"

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
	cr_assert_eq(quant_type_parse("q5_1", &t), ERR_UNSUP);
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
	for (int j = 0; j < 4; j++) {
		qk.scales[j] = (uint8_t)(j + 1);
		qk.scales[j + 4] = (uint8_t)j;
	}
	for (int j = 4; j < 8; j++)
		qk.scales[j + 4] = (uint8_t)((j + 1) | (j << 4));
	memset(qk.qs, 0x33, sizeof qk.qs);
	cr_assert_eq(quant_dequantize(TENSOR_Q4_K, &qk, y, 256), 0);
	for (int e = 0; e < 256; e++)
		cr_assert_eq(y[e], 3.0f * (e / 32 + 1) - 0.5f * (e / 32), "e=%d", e);
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
}
