/* quant: element types, half floats, ggml block (de)quantization.
 * Block layouts: ../shared/spec/reference.md §3 (ggml-common.h). */
#include "formats/quant.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"

static const struct {
	uint32_t type;
	struct quant_type_info info;
} type_table[] = {
	{ TENSOR_F32, { "f32", 1, 4 } },
	{ TENSOR_F16, { "f16", 1, 2 } },
	{ TENSOR_BF16, { "bf16", 1, 2 } },
	{ TENSOR_Q8_0, { "q8_0", QK8_0, sizeof(struct block_q8_0) } },
	{ TENSOR_Q4_0, { "q4_0", QK4_0, sizeof(struct block_q4_0) } },
	{ TENSOR_Q4_K, { "q4_K", QK_K, sizeof(struct block_q4_k) } },
	{ TENSOR_Q6_K, { "q6_K", QK_K, sizeof(struct block_q6_k) } },
};

const struct quant_type_info *quant_type_info(uint32_t type)
{
	for (size_t i = 0; i < sizeof type_table / sizeof type_table[0]; i++)
		if (type_table[i].type == type)
			return &type_table[i].info;
	return NULL;
}

/* ggml type ids (reference.md §3). Holes are ids ggml removed (Q4_2, Q4_3,
 * the 4x4 / 4x8 / 8x8 repacked layouts): files never carry them. */
static const char *const ggml_names[] = {
	[0] = "F32",      [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [6] = "Q5_0",
	[7] = "Q5_1",     [8] = "Q8_0",    [9] = "Q8_1",    [10] = "Q2_K",   [11] = "Q3_K",
	[12] = "Q4_K",    [13] = "Q5_K",   [14] = "Q6_K",   [15] = "Q8_K",   [16] = "IQ2_XXS",
	[17] = "IQ2_XS",  [18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL", [21] = "IQ3_S",
	[22] = "IQ2_S",   [23] = "IQ4_XS", [24] = "I8",     [25] = "I16",    [26] = "I32",
	[27] = "I64",     [28] = "F64",    [29] = "IQ1_M",  [30] = "BF16",   [34] = "TQ1_0",
	[35] = "TQ2_0",   [39] = "MXFP4",
};

const char *quant_ggml_type_name(uint32_t type)
{
	if (type >= sizeof ggml_names / sizeof ggml_names[0])
		return NULL;
	return ggml_names[type];
}

const char *quant_supported_list(void)
{
	/* Kept by hand beside type_table; test_quant checks they agree. */
	return "F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K";
}

int quant_type_parse(const char *name, uint32_t *type)
{
	for (size_t i = 0; i < sizeof type_table / sizeof type_table[0]; i++)
		if (strcasecmp(type_table[i].info.name, name) == 0) {
			*type = type_table[i].type;
			return 0;
		}
	return err_set(ERR_UNSUP, "unknown tensor type '%s' (known: f32 f16 bf16 q8_0 q4_0 q4_K q6_K)", name);
}

int quant_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes)
{
	const struct quant_type_info *ti = quant_type_info(type);
	if (!ti) {
		const char *gn = quant_ggml_type_name(type);
		return err_set(ERR_UNSUP, "tensor type %s (type %u) is one Unicorn cannot run yet; it runs %s",
			       gn ? gn : "unknown", type, quant_supported_list());
	}
	if (n % ti->block_elems)
		return err_set(ERR_INVAL, "%llu elements is not a multiple of the %s block size %u",
			       (unsigned long long)n, ti->name, ti->block_elems);
	uint64_t blocks = n / ti->block_elems;
	if (blocks > UINT64_MAX / ti->block_bytes)
		return err_set(ERR_RANGE, "%llu %s elements overflow a 64-bit size", (unsigned long long)n, ti->name);
	*bytes = blocks * ti->block_bytes;
	return 0;
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

float quant_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;
	if (exp == 0x1f) /* inf / nan */
		return bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) { /* zero / subnormal: man * 2^-24 */
		float v = ldexpf((float)man, -24);
		return sign ? -v : v;
	}
	return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t quant_f32_to_f16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffffu;
	if (a >= 0x7f800000u) /* inf / nan (keep nan quiet) */
		return sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0);
	if (a >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
		return sign | 0x7c00;
	if (a < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
		/* add 0.5 (as float) so the FPU rounds the mantissa to nearest even */
		float v = bits_f32(a) + 0.5f;
		return sign | (uint16_t)(f32_bits(v) - 0x3f000000u);
	}
	uint32_t man_odd = (a >> 13) & 1;
	a += 0xc8000fffu + man_odd; /* rebias exponent (-112 << 23) and round to nearest even */
	return sign | (uint16_t)(a >> 13);
}

float quant_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

uint16_t quant_f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* nan: keep it a quiet nan */
		return (uint16_t)((u >> 16) | 64);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

/* Q4_K packs a 6-bit scale and a 6-bit min per 32-element sub-block j (0..7)
 * into 12 bytes; this is the inverse of the unpacking in the spec. */
static void q4k_get_scale_min(int j, const uint8_t *s, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
		*m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
	}
}

static void q4k_put_scale_min(int j, uint8_t *s, uint8_t sc, uint8_t m)
{
	if (j < 4) {
		s[j] = (uint8_t)((s[j] & 0xC0) | (sc & 63));
		s[j + 4] = (uint8_t)((s[j + 4] & 0xC0) | (m & 63));
	} else {
		s[j + 4] = (uint8_t)((sc & 0xF) | ((m & 0xF) << 4));
		s[j - 4] = (uint8_t)((s[j - 4] & 63) | ((sc >> 4) << 6));
		s[j] = (uint8_t)((s[j] & 63) | ((m >> 4) << 6));
	}
}

static void dequant_q8_0(const struct block_q8_0 *b, float *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, y += QK8_0) {
		float d = quant_f16_to_f32(b[i].d);
		for (int j = 0; j < QK8_0; j++)
			y[j] = d * b[i].qs[j];
	}
}

static void dequant_q4_0(const struct block_q4_0 *b, float *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, y += QK4_0) {
		float d = quant_f16_to_f32(b[i].d);
		for (int j = 0; j < QK4_0 / 2; j++) {
			y[j] = d * ((b[i].qs[j] & 0xF) - 8);
			y[j + QK4_0 / 2] = d * ((b[i].qs[j] >> 4) - 8);
		}
	}
}

static void dequant_q4_k(const struct block_q4_k *b, float *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++) {
		float d = quant_f16_to_f32(b[i].d), dmin = quant_f16_to_f32(b[i].dmin);
		const uint8_t *q = b[i].qs;
		for (int c = 0; c < 4; c++, q += 32) {
			uint8_t sc, m;
			q4k_get_scale_min(2 * c, b[i].scales, &sc, &m);
			float d1 = d * sc, m1 = dmin * m;
			q4k_get_scale_min(2 * c + 1, b[i].scales, &sc, &m);
			float d2 = d * sc, m2 = dmin * m;
			for (int l = 0; l < 32; l++)
				*y++ = d1 * (q[l] & 0xF) - m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * (q[l] >> 4) - m2;
		}
	}
}

static void dequant_q6_k(const struct block_q6_k *b, float *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++) {
		float d = quant_f16_to_f32(b[i].d);
		const uint8_t *ql = b[i].ql, *qh = b[i].qh;
		const int8_t *sc = b[i].scales;
		for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, y += 128) {
			for (int l = 0; l < 32; l++) {
				int is = l / 16;
				int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
				int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
				int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
				int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
				y[l] = d * sc[is] * q1;
				y[l + 32] = d * sc[is + 2] * q2;
				y[l + 64] = d * sc[is + 4] * q3;
				y[l + 96] = d * sc[is + 6] * q4;
			}
		}
	}
}

/* What both directions check first: a supported type and n a whole number
 * of its blocks whose byte size fits in 64 bits. Gives the block count. */
static int quant_blocks(uint32_t type, uint64_t n, uint64_t *nb)
{
	uint64_t bytes;
	int rc = quant_row_bytes(type, n, &bytes);
	if (rc)
		return rc;
	*nb = n / quant_type_info(type)->block_elems;
	return 0;
}

int quant_dequantize(uint32_t type, const void *src, float *dst, uint64_t n)
{
	uint64_t nb;
	int rc = quant_blocks(type, n, &nb);
	if (rc)
		return rc;
	switch (type) {
	case TENSOR_F32:
		memcpy(dst, src, n * 4);
		break;
	case TENSOR_F16: {
		const uint8_t *p = src;
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h;
			memcpy(&h, p + 2 * i, 2);
			dst[i] = quant_f16_to_f32(h);
		}
		break;
	}
	case TENSOR_BF16: {
		const uint8_t *p = src;
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h;
			memcpy(&h, p + 2 * i, 2);
			dst[i] = quant_bf16_to_f32(h);
		}
		break;
	}
	case TENSOR_Q8_0: dequant_q8_0(src, dst, nb); break;
	case TENSOR_Q4_0: dequant_q4_0(src, dst, nb); break;
	case TENSOR_Q4_K: dequant_q4_k(src, dst, nb); break;
	case TENSOR_Q6_K: dequant_q6_k(src, dst, nb); break;
	}
	return 0;
}

/* llama.cpp's reference rounding (quantize_row_q8_0_ref), so our files match. */
static void quant_q8_0(const float *x, struct block_q8_0 *b, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += QK8_0) {
		float amax = 0;
		for (int j = 0; j < QK8_0; j++)
			amax = fmaxf(amax, fabsf(x[j]));
		float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
		b[i].d = quant_f32_to_f16(d);
		for (int j = 0; j < QK8_0; j++)
			b[i].qs[j] = (int8_t)roundf(x[j] * id);
	}
}

/* quantize_row_q4_0_ref: the signed value of largest magnitude maps to -8. */
static void quant_q4_0(const float *x, struct block_q4_0 *b, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += QK4_0) {
		float amax = 0, max = 0;
		for (int j = 0; j < QK4_0; j++)
			if (fabsf(x[j]) > amax) {
				amax = fabsf(x[j]);
				max = x[j];
			}
		float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
		b[i].d = quant_f32_to_f16(d);
		for (int j = 0; j < QK4_0 / 2; j++) {
			int x0 = (int)(int8_t)(x[j] * id + 8.5f), x1 = (int)(int8_t)(x[j + 16] * id + 8.5f);
			uint8_t q0 = (uint8_t)(x0 < 15 ? x0 : 15), q1 = (uint8_t)(x1 < 15 ? x1 : 15);
			b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
		}
	}
}

static int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* A plain min/max Q4_K quantizer (not llama.cpp's iterative search): enough
 * for tests and synthetic models; dequantization is the exact ggml format. */
static void quant_q4_k(const float *x, struct block_q4_k *b, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += QK_K) {
		float scale[8], minv[8], maxs = 0, maxm = 0;
		for (int j = 0; j < 8; j++) {
			float mn = 0, mx = 0;
			for (int l = 0; l < 32; l++) {
				mn = fminf(mn, x[32 * j + l]);
				mx = fmaxf(mx, x[32 * j + l]);
			}
			scale[j] = (mx - mn) / 15.0f;
			minv[j] = -mn;
			maxs = fmaxf(maxs, scale[j]);
			maxm = fmaxf(maxm, minv[j]);
		}
		float d = maxs / 63.0f, dmin = maxm / 63.0f;
		memset(&b[i], 0, sizeof b[i]);
		b[i].d = quant_f32_to_f16(d);
		b[i].dmin = quant_f32_to_f16(dmin);
		d = quant_f16_to_f32(b[i].d);
		dmin = quant_f16_to_f32(b[i].dmin);
		for (int j = 0; j < 8; j++) {
			uint8_t sc = (uint8_t)clampi(d ? (int)lroundf(scale[j] / d) : 0, 0, 63);
			uint8_t m = (uint8_t)clampi(dmin ? (int)lroundf(minv[j] / dmin) : 0, 0, 63);
			q4k_put_scale_min(j, b[i].scales, sc, m);
			float ds = d * sc, dm = dmin * m;
			uint8_t *q = b[i].qs + 32 * (j / 2);
			for (int l = 0; l < 32; l++) {
				int v = ds ? clampi((int)lroundf((x[32 * j + l] + dm) / ds), 0, 15) : 0;
				q[l] |= (uint8_t)(j & 1 ? v << 4 : v);
			}
		}
	}
}

/* A plain absmax Q6_K quantizer per 16-element sub-block. */
static void quant_q6_k(const float *x, struct block_q6_k *b, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += QK_K) {
		float scale[16], maxs = 0;
		for (int j = 0; j < 16; j++) {
			float amax = 0;
			for (int l = 0; l < 16; l++)
				amax = fmaxf(amax, fabsf(x[16 * j + l]));
			scale[j] = amax / 31.0f;
			maxs = fmaxf(maxs, scale[j]);
		}
		memset(&b[i], 0, sizeof b[i]);
		b[i].d = quant_f32_to_f16(maxs / 127.0f);
		float d = quant_f16_to_f32(b[i].d);
		for (int j = 0; j < 16; j++)
			b[i].scales[j] = (int8_t)clampi(d ? (int)lroundf(scale[j] / d) : 0, 0, 127);
		for (int e = 0; e < QK_K; e++) {
			int half = e / 128, r = e % 128, l = r % 32, k = r / 32; /* k: which of the 4 quarter rows */
			float ds = d * b[i].scales[e / 16];
			int q = ds ? clampi((int)lroundf(x[e] / ds), -32, 31) + 32 : 32;
			uint8_t *ql = b[i].ql + 64 * half, *qh = b[i].qh + 32 * half;
			int qlo = q & 0xF, qhi = q >> 4;
			if (k == 0) ql[l] |= (uint8_t)qlo;
			else if (k == 1) ql[l + 32] |= (uint8_t)qlo;
			else if (k == 2) ql[l] |= (uint8_t)(qlo << 4);
			else ql[l + 32] |= (uint8_t)(qlo << 4);
			qh[l] |= (uint8_t)(qhi << (2 * k));
		}
	}
}

int quant_quantize(uint32_t type, const float *src, void *dst, uint64_t n)
{
	uint64_t nb;
	int rc = quant_blocks(type, n, &nb);
	if (rc)
		return rc;
	switch (type) {
	case TENSOR_F32:
		memcpy(dst, src, n * 4);
		break;
	case TENSOR_F16:
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = quant_f32_to_f16(src[i]);
			memcpy((uint8_t *)dst + 2 * i, &h, 2);
		}
		break;
	case TENSOR_BF16:
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = quant_f32_to_bf16(src[i]);
			memcpy((uint8_t *)dst + 2 * i, &h, 2);
		}
		break;
	case TENSOR_Q8_0: quant_q8_0(src, dst, nb); break;
	case TENSOR_Q4_0: quant_q4_0(src, dst, nb); break;
	case TENSOR_Q4_K: quant_q4_k(src, dst, nb); break;
	case TENSOR_Q6_K: quant_q6_k(src, dst, nb); break;
	}
	return 0;
}
