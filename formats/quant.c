/* quant: element types, half floats, ggml block (de)quantization.
 * Block layouts: ../shared/spec/reference.md §3 (ggml-common.h). */
#include "formats/quant.h"

#include <math.h>
#include <stdbool.h>
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
	{ TENSOR_Q4_1, { "q4_1", QK4_1, sizeof(struct block_q4_1) } },
	{ TENSOR_Q5_0, { "q5_0", QK5_0, sizeof(struct block_q5_0) } },
	{ TENSOR_Q5_1, { "q5_1", QK5_1, sizeof(struct block_q5_1) } },
	{ TENSOR_IQ4_NL, { "iq4_nl", QK4_NL, sizeof(struct block_iq4_nl) } },
	{ TENSOR_Q2_K, { "q2_K", QK_K, sizeof(struct block_q2_k) } },
	{ TENSOR_Q3_K, { "q3_K", QK_K, sizeof(struct block_q3_k) } },
	{ TENSOR_Q5_K, { "q5_K", QK_K, sizeof(struct block_q5_k) } },
	{ TENSOR_IQ4_XS, { "iq4_xs", QK_K, sizeof(struct block_iq4_xs) } },
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
	return "F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K, IQ4_XS";
}

int quant_type_parse(const char *name, uint32_t *type)
{
	for (size_t i = 0; i < sizeof type_table / sizeof type_table[0]; i++)
		if (strcasecmp(type_table[i].info.name, name) == 0) {
			*type = type_table[i].type;
			return 0;
		}
	return err_set(ERR_UNSUP, "unknown tensor type '%s' (known: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl "
			"q2_K q3_K q4_K q5_K q6_K iq4_xs)", name);
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

static uint16_t rd16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}

static void wr16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* ggml's kvalues_iq4nl: the 16 levels of IQ4_NL and IQ4_XS, ascending. */
static const int8_t iq4nl_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/* The 32-element block types. Each starts with d (f16); the affine ones
 * (Q4_1, Q5_1) hold a min m next, the 5-bit ones a 32-bit qh. Element j < 16
 * is the low nibble of qs[j], element j + 16 its high nibble; a 5-bit type's
 * bit 4 of element j is bit j of qh (little-endian). Offsets -1: absent. */
struct b32_layout {
	int m, qh, qs;
	int off;  /* added to the code of the symmetric types (Q4_0, Q5_0) */
	bool nl;  /* IQ4_NL: the code indexes iq4nl_values */
};

static struct b32_layout b32_layout(uint32_t type)
{
	switch (type) {
	case TENSOR_Q4_0: return (struct b32_layout){ -1, -1, offsetof(struct block_q4_0, qs), -8, false };
	case TENSOR_Q4_1: return (struct b32_layout){ offsetof(struct block_q4_1, m), -1, offsetof(struct block_q4_1, qs), 0, false };
	case TENSOR_Q5_0: return (struct b32_layout){ -1, offsetof(struct block_q5_0, qh), offsetof(struct block_q5_0, qs), -16, false };
	case TENSOR_Q5_1:
		return (struct b32_layout){ offsetof(struct block_q5_1, m), offsetof(struct block_q5_1, qh),
					    offsetof(struct block_q5_1, qs), 0, false };
	default: return (struct b32_layout){ -1, -1, offsetof(struct block_iq4_nl, qs), 0, true };
	}
}

static void dequant_b32(uint32_t type, const uint8_t *b, float *y, uint64_t nb)
{
	struct b32_layout L = b32_layout(type);
	uint32_t bb = quant_type_info(type)->block_bytes;
	for (uint64_t i = 0; i < nb; i++, b += bb, y += 32) {
		float d = quant_f16_to_f32(rd16(b)), m = L.m >= 0 ? quant_f16_to_f32(rd16(b + L.m)) : 0.0f;
		uint32_t h = 0;
		if (L.qh >= 0)
			memcpy(&h, b + L.qh, 4);
		for (int j = 0; j < 32; j++) {
			int q = ((b[L.qs + j % 16] >> (4 * (j / 16))) & 0xF) | (int)((h >> j) & 1) << 4;
			if (L.nl)
				y[j] = d * iq4nl_values[q];
			else if (L.m >= 0)
				y[j] = d * q + m;
			else
				y[j] = d * (q + L.off);
		}
	}
}

static void store_b32(uint32_t type, uint8_t *b, uint16_t d, uint16_t m, const uint8_t q[32])
{
	struct b32_layout L = b32_layout(type);
	memset(b, 0, quant_type_info(type)->block_bytes);
	wr16(b, d);
	if (L.m >= 0)
		wr16(b + L.m, m);
	uint32_t h = 0;
	for (int j = 0; j < 32; j++) {
		b[L.qs + j % 16] |= (uint8_t)((q[j] & 0xF) << (4 * (j / 16)));
		h |= (uint32_t)(q[j] >> 4) << j;
	}
	if (L.qh >= 0)
		memcpy(b + L.qh, &h, 4);
}

/* The iq4nl level nearest v by trying every level (ties go to the lower
 * level): the definition quant_iq4_nearest must agree with (tests). */
uint8_t quant_iq4_nearest_exhaustive(float v)
{
	int best = 0;
	for (int k = 1; k < 16; k++)
		if (fabsf(v - iq4nl_values[k]) < fabsf(v - iq4nl_values[best]))
			best = k;
	return (uint8_t)best;
}

/* Midpoints of neighbouring iq4nl levels (exact halves). v above mid[k]
 * is nearer level k + 1 than level k; at a midpoint the lower level wins, as
 * in the exhaustive search. */
static const float iq4_mid[15] = { -115.5f, -93.5f, -74.0f, -57.0f, -42.0f, -28.5f, -16.0f, -4.5f,
				   7.0f,    19.0f,  31.5f,  45.5f,  61.0f,  79.0f,  101.0f };

/* The iq4nl level nearest v: the levels are sorted, so the nearest one is
 * the number of midpoints below v, found by a 4-step binary search (the
 * exhaustive search's 15 distance comparisons made quantizing ~0.5M weights/s
 * per thread, too slow for a 1B-shape IQ4_XS file). */
uint8_t quant_iq4_nearest(float v)
{
	int k = v > iq4_mid[7] ? 8 : 0;
	k += v > iq4_mid[k + 3] ? 4 : 0;
	k += v > iq4_mid[k + 1] ? 2 : 0;
	k += v > iq4_mid[k] ? 1 : 0;
	return (uint8_t)k;
}

/* The nearest level per element of x[0..n) at scale d; the squared error. */
static float iq4_pick(const float *x, int n, float d, uint8_t *q)
{
	float id = d ? 1.0f / d : 0.0f, err = 0;
	for (int j = 0; j < n; j++) {
		q[j] = quant_iq4_nearest(x[j] * id);
		float e = x[j] - d * iq4nl_values[q[j]];
		err += e * e;
	}
	return err;
}

/* A scale for x[0..n) (n <= 32) by a small search: each candidate maps the
 * element of largest magnitude near the outer level -127 and picks the
 * levels; for those levels the least-squares scale sxt / stt leaves the
 * squared error sxx - sxt^2 / stt, so the candidate of largest sxt^2 / stt
 * wins without picking the levels a second time at its refitted scale (that
 * second pass per candidate was half the quantizer's time). Its levels at
 * the winning scale go to q. */
static float iq4_scale(const float *x, int n, uint8_t *q)
{
	float amax = 0, max = 0;
	for (int j = 0; j < n; j++)
		if (fabsf(x[j]) > amax) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	if (amax == 0) {
		memset(q, 0, (size_t)n);
		return 0;
	}
	double best_score = -1;
	float best = max / iq4nl_values[0];
	for (int t = -8; t <= 8; t++) {
		float id = (iq4nl_values[0] + t) / max;
		double sxt = 0, stt = 0;
		for (int j = 0; j < n; j++) {
			int v = iq4nl_values[quant_iq4_nearest(x[j] * id)];
			sxt += (double)x[j] * v;
			stt += (double)v * v;
		}
		if (stt > 0 && sxt * sxt / stt > best_score) {
			best_score = sxt * sxt / stt;
			best = (float)(sxt / stt);
		}
	}
	iq4_pick(x, n, best, q);
	return best;
}

/* The 32-element types. Q4_0, Q5_0, Q4_1 and Q5_1 round as llama.cpp's
 * quantize_row_*_ref do (so our files match): the symmetric ones map the
 * signed value of largest magnitude to the lowest code, the affine ones span
 * [min, max]. IQ4_NL searches its scale (iq4_scale). */
static void quant_b32(uint32_t type, const float *x, uint8_t *b, uint64_t nb)
{
	struct b32_layout L = b32_layout(type);
	uint32_t bb = quant_type_info(type)->block_bytes;
	int top = L.qh >= 0 ? 31 : 15;
	for (uint64_t i = 0; i < nb; i++, b += bb, x += 32) {
		uint8_t q[32];
		uint16_t dh, mh = 0;
		if (L.nl) {
			dh = quant_f32_to_f16(iq4_scale(x, 32, q));
			iq4_pick(x, 32, quant_f16_to_f32(dh), q);
		} else if (L.m >= 0) {
			float mn = x[0], mx = x[0];
			for (int j = 1; j < 32; j++) {
				mn = fminf(mn, x[j]);
				mx = fmaxf(mx, x[j]);
			}
			float d = (mx - mn) / top, id = d ? 1.0f / d : 0.0f;
			dh = quant_f32_to_f16(d);
			mh = quant_f32_to_f16(mn);
			for (int j = 0; j < 32; j++) {
				int v = (int8_t)((x[j] - mn) * id + 0.5f);
				q[j] = (uint8_t)(v < top ? v : top);
			}
		} else {
			float amax = 0, max = 0;
			for (int j = 0; j < 32; j++)
				if (fabsf(x[j]) > amax) {
					amax = fabsf(x[j]);
					max = x[j];
				}
			float d = max / L.off, id = d ? 1.0f / d : 0.0f;
			dh = quant_f32_to_f16(d);
			for (int j = 0; j < 32; j++) {
				int v = (int8_t)(x[j] * id + (0.5f - L.off));
				q[j] = (uint8_t)(v < top ? v : top);
			}
		}
		store_b32(type, b, dh, mh, q);
	}
}

/* Q4_K and Q5_K pack a 6-bit scale and a 6-bit min per 32-element sub-block
 * j (0..7) into 12 bytes (the unpacking in the spec); put is the inverse. */
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

/* Q3_K packs sixteen 6-bit scales (stored + 32) into 12 bytes: the low 4
 * bits of scale i in byte i (i < 8, low nibble) or i - 8 (high nibble), the
 * high 2 bits in byte 8 + i % 4 at bit 2 * (i / 4). */
static int q3k_get_scale(const uint8_t *s, int i)
{
	int lo = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
	int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
	return (lo | hi << 4) - 32;
}

static void q3k_put_scale(uint8_t *s, int i, int v) /* s zeroed before */
{
	unsigned u = (unsigned)(v + 32);
	if (i < 8)
		s[i] |= (uint8_t)(u & 0xF);
	else
		s[i - 8] |= (uint8_t)((u & 0xF) << 4);
	s[8 + i % 4] |= (uint8_t)((u >> 4) << (2 * (i / 4)));
}

/* Where element e of a K block keeps its low bits: Q2_K and Q3_K put 2 bits
 * at qs[k2_byte(e)] >> k2_shift(e) (Q3_K's third bit is bit e / 32 of
 * hmask[e % 32]); Q4_K and Q5_K a nibble at qs[k4_byte(e)] >> k4_shift(e)
 * (Q5_K's fifth bit is bit e / 32 of qh[e % 32]). */
static int k2_byte(int e) { return 32 * (e / 128) + e % 32; }
static int k2_shift(int e) { return 2 * (e % 128 / 32); }
static int k4_byte(int e) { return 32 * (e / 64) + e % 32; }
static int k4_shift(int e) { return 4 * (e / 32 % 2); }

static void dequant_q8_0(const struct block_q8_0 *b, float *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, y += QK8_0) {
		float d = quant_f16_to_f32(b[i].d);
		for (int j = 0; j < QK8_0; j++)
			y[j] = d * b[i].qs[j];
	}
}

/* One Q4_K (qh NULL) or Q5_K block. */
static void dequant_k45(uint16_t dh, uint16_t dminh, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
			float *y)
{
	float d = quant_f16_to_f32(dh), dmin = quant_f16_to_f32(dminh);
	for (int s = 0; s < 8; s++) {
		uint8_t sc, m;
		q4k_get_scale_min(s, scales, &sc, &m);
		float d1 = d * sc, m1 = dmin * m;
		for (int e = 32 * s; e < 32 * s + 32; e++) {
			int q = (qs[k4_byte(e)] >> k4_shift(e)) & 0xF;
			if (qh)
				q |= ((qh[e % 32] >> (e / 32)) & 1) << 4;
			y[e] = d1 * q - m1;
		}
	}
}

static void dequant_q2_k(const struct block_q2_k *b, float *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, y += QK_K) {
		float d = quant_f16_to_f32(b[i].d), dmin = quant_f16_to_f32(b[i].dmin);
		for (int s = 0; s < 16; s++) {
			float dl = d * (b[i].scales[s] & 0xF), ml = dmin * (b[i].scales[s] >> 4);
			for (int e = 16 * s; e < 16 * s + 16; e++)
				y[e] = dl * ((b[i].qs[k2_byte(e)] >> k2_shift(e)) & 3) - ml;
		}
	}
}

static void dequant_q3_k(const struct block_q3_k *b, float *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, y += QK_K) {
		float d = quant_f16_to_f32(b[i].d);
		for (int s = 0; s < 16; s++) {
			float dl = d * q3k_get_scale(b[i].scales, s);
			for (int e = 16 * s; e < 16 * s + 16; e++) {
				int q = (b[i].qs[k2_byte(e)] >> k2_shift(e)) & 3;
				y[e] = dl * (q - ((b[i].hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4));
			}
		}
	}
}

static void dequant_iq4_xs(const struct block_iq4_xs *b, float *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++) {
		float d = quant_f16_to_f32(b[i].d);
		for (int s = 0; s < 8; s++, y += 32) {
			int ls = ((b[i].scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | ((b[i].scales_h >> (2 * s)) & 3) << 4;
			float dl = d * (ls - 32);
			const uint8_t *qs = b[i].qs + 16 * s;
			for (int j = 0; j < 16; j++) {
				y[j] = dl * iq4nl_values[qs[j] & 0xF];
				y[j + 16] = dl * iq4nl_values[qs[j] >> 4];
			}
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
	case TENSOR_Q4_0:
	case TENSOR_Q4_1:
	case TENSOR_Q5_0:
	case TENSOR_Q5_1:
	case TENSOR_IQ4_NL: dequant_b32(type, src, dst, nb); break;
	case TENSOR_Q2_K: dequant_q2_k(src, dst, nb); break;
	case TENSOR_Q3_K: dequant_q3_k(src, dst, nb); break;
	case TENSOR_Q4_K:
		for (uint64_t i = 0; i < nb; i++) {
			const struct block_q4_k *b = (const struct block_q4_k *)src + i;
			dequant_k45(b->d, b->dmin, b->scales, b->qs, NULL, dst + i * QK_K);
		}
		break;
	case TENSOR_Q5_K:
		for (uint64_t i = 0; i < nb; i++) {
			const struct block_q5_k *b = (const struct block_q5_k *)src + i;
			dequant_k45(b->d, b->dmin, b->scales, b->qs, b->qh, dst + i * QK_K);
		}
		break;
	case TENSOR_Q6_K: dequant_q6_k(src, dst, nb); break;
	case TENSOR_IQ4_XS: dequant_iq4_xs(src, dst, nb); break;
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

/* Asymmetric K sub-blocks (Q2_K, Q4_K, Q5_K): nsub sub-blocks of len
 * elements, x ~ d*sc*q - dmin*m with codes q in 0..top and integer scales sc
 * and mins m in 0..smax. A plain min/max fit (not llama.cpp's iterative
 * search): enough for tests and synthetic models; dequantization is the exact
 * ggml format. Gives the f16 d and dmin, sc, m and the codes q[nsub*len]. */
static void kq_minmax(const float *x, int nsub, int len, int top, int smax, uint16_t *dh, uint16_t *dminh,
		      uint8_t *sc, uint8_t *m, uint8_t *q)
{
	float scale[16], minv[16], maxs = 0, maxm = 0;
	for (int j = 0; j < nsub; j++) {
		float mn = 0, mx = 0;
		for (int l = 0; l < len; l++) {
			mn = fminf(mn, x[len * j + l]);
			mx = fmaxf(mx, x[len * j + l]);
		}
		scale[j] = (mx - mn) / (float)top;
		minv[j] = -mn;
		maxs = fmaxf(maxs, scale[j]);
		maxm = fmaxf(maxm, minv[j]);
	}
	*dh = quant_f32_to_f16(maxs / (float)smax);
	*dminh = quant_f32_to_f16(maxm / (float)smax);
	float d = quant_f16_to_f32(*dh), dmin = quant_f16_to_f32(*dminh);
	for (int j = 0; j < nsub; j++) {
		sc[j] = (uint8_t)clampi(d ? (int)lroundf(scale[j] / d) : 0, 0, smax);
		m[j] = (uint8_t)clampi(dmin ? (int)lroundf(minv[j] / dmin) : 0, 0, smax);
		float ds = d * sc[j], dm = dmin * m[j];
		for (int l = 0; l < len; l++)
			q[len * j + l] = (uint8_t)(ds ? clampi((int)lroundf((x[len * j + l] + dm) / ds), 0, top) : 0);
	}
}

static void quant_q2_k(const float *x, struct block_q2_k *b, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += QK_K) {
		uint8_t sc[16], m[16], q[QK_K];
		memset(&b[i], 0, sizeof b[i]);
		kq_minmax(x, 16, 16, 3, 15, &b[i].d, &b[i].dmin, sc, m, q);
		for (int j = 0; j < 16; j++)
			b[i].scales[j] = (uint8_t)(sc[j] | m[j] << 4);
		for (int e = 0; e < QK_K; e++)
			b[i].qs[k2_byte(e)] |= (uint8_t)(q[e] << k2_shift(e));
	}
}

/* Q4_K (qh NULL) and Q5_K: 8 sub-blocks of 32, codes 0..15 or 0..31. */
static void quant_k45(const float *x, uint16_t *d, uint16_t *dmin, uint8_t *scales, uint8_t *qs, uint8_t *qh)
{
	uint8_t sc[8], m[8], q[QK_K];
	kq_minmax(x, 8, 32, qh ? 31 : 15, 63, d, dmin, sc, m, q);
	for (int j = 0; j < 8; j++)
		q4k_put_scale_min(j, scales, sc[j], m[j]);
	for (int e = 0; e < QK_K; e++) {
		qs[k4_byte(e)] |= (uint8_t)((q[e] & 0xF) << k4_shift(e));
		if (qh)
			qh[e % 32] |= (uint8_t)((q[e] >> 4) << (e / 32));
	}
}

/* Q3_K: per 16-element sub-block the signed value of largest magnitude maps
 * to code -4 (codes -4..3); the sub-block scales, signed, share d so that the
 * largest in magnitude maps to -32. */
static void quant_q3_k(const float *x, struct block_q3_k *b, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += QK_K) {
		float scale[16], smax = 0;
		for (int j = 0; j < 16; j++) {
			float amax = 0, max = 0;
			for (int l = 0; l < 16; l++)
				if (fabsf(x[16 * j + l]) > amax) {
					amax = fabsf(x[16 * j + l]);
					max = x[16 * j + l];
				}
			scale[j] = max / -4.0f;
			if (fabsf(scale[j]) > fabsf(smax))
				smax = scale[j];
		}
		memset(&b[i], 0, sizeof b[i]);
		b[i].d = quant_f32_to_f16(smax / -32.0f);
		float d = quant_f16_to_f32(b[i].d);
		for (int j = 0; j < 16; j++) {
			int ls = d ? clampi((int)lroundf(scale[j] / d), -32, 31) : 0;
			q3k_put_scale(b[i].scales, j, ls);
			float dl = d * ls;
			for (int e = 16 * j; e < 16 * j + 16; e++) {
				int v = (dl ? clampi((int)lroundf(x[e] / dl), -4, 3) : 0) + 4;
				b[i].qs[k2_byte(e)] |= (uint8_t)((v & 3) << k2_shift(e));
				b[i].hmask[e % 32] |= (uint8_t)((v >> 2) << (e / 32));
			}
		}
	}
}

/* IQ4_XS: each sub-block of 32 gets its own searched scale (iq4_scale); the
 * block's d maps the largest in magnitude to -32, the 6-bit sub-block scales
 * are rounded against d and the levels picked again at the stored scale. */
static void quant_iq4_xs(const float *x, struct block_iq4_xs *b, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += QK_K) {
		float s[8], smax = 0;
		uint8_t q[32];
		for (int j = 0; j < 8; j++) {
			s[j] = iq4_scale(x + 32 * j, 32, q);
			if (fabsf(s[j]) > fabsf(smax))
				smax = s[j];
		}
		memset(&b[i], 0, sizeof b[i]);
		b[i].d = quant_f32_to_f16(smax / -32.0f);
		float d = quant_f16_to_f32(b[i].d);
		for (int j = 0; j < 8; j++) {
			int ls = (d ? clampi((int)lroundf(s[j] / d), -32, 31) : 0) + 32;
			b[i].scales_l[j / 2] |= (uint8_t)((ls & 0xF) << (4 * (j % 2)));
			b[i].scales_h |= (uint16_t)((ls >> 4) << (2 * j));
			iq4_pick(x + 32 * j, 32, d * (ls - 32), q);
			for (int l = 0; l < 16; l++)
				b[i].qs[16 * j + l] = (uint8_t)(q[l] | q[l + 16] << 4);
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
	case TENSOR_Q4_0:
	case TENSOR_Q4_1:
	case TENSOR_Q5_0:
	case TENSOR_Q5_1:
	case TENSOR_IQ4_NL: quant_b32(type, src, dst, nb); break;
	case TENSOR_Q2_K: quant_q2_k(src, dst, nb); break;
	case TENSOR_Q3_K: quant_q3_k(src, dst, nb); break;
	case TENSOR_Q4_K:
		for (uint64_t i = 0; i < nb; i++) {
			struct block_q4_k *b = (struct block_q4_k *)dst + i;
			memset(b, 0, sizeof *b);
			quant_k45(src + i * QK_K, &b->d, &b->dmin, b->scales, b->qs, NULL);
		}
		break;
	case TENSOR_Q5_K:
		for (uint64_t i = 0; i < nb; i++) {
			struct block_q5_k *b = (struct block_q5_k *)dst + i;
			memset(b, 0, sizeof *b);
			quant_k45(src + i * QK_K, &b->d, &b->dmin, b->scales, b->qs, b->qh);
		}
		break;
	case TENSOR_Q6_K: quant_q6_k(src, dst, nb); break;
	case TENSOR_IQ4_XS: quant_iq4_xs(src, dst, nb); break;
	}
	return 0;
}
