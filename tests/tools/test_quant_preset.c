/* tools/quant_preset: the per-tensor types of plain --type values and of
 * llama.cpp's Q3_K_M / Q4_K_M / Q5_K_M mixes, checked against tables written
 * out by hand from llama.cpp's rule (src/llama-quant.cpp) for Gemma 3 1B
 * (n_embd 1152: not a multiple of 256, so the fall-backs apply) and 4B (2560). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "formats/quant.h"
#include "tools/mkmodel.h"
#include "tools/quant_preset.h"

/* use_more_bits layers (first/last eighth, every third between), one letter
 * per layer: H = the higher type. */
static const char more_1b[] = "HHHLLHLLHLLHLLHLLHLLHLHHHH";         /* 26 layers */
static const char more_4b[] = "HHHHLLHLLHLLHLLHLLHLLHLLHLLHLHHHHH"; /* 34 layers */

struct expect {
	const char *role;            /* GGUF name part */
	uint32_t lo, hi;             /* type in L / H layers (same for both where the rule has no layer part) */
	int split;                   /* -1: the more_* string decides H; n >= 0: layers below n are H */
};

/* Check every tensor of shape's config against the table (roles not listed
 * take other_type; norms f32; token_embd embd_type). */
static void check_model(const char *shape, const char *preset_name, const char *more,
			const struct expect *ex, size_t n_ex, uint32_t other_type, uint32_t embd_type)
{
	struct gemma3_config c;
	cr_assert_eq(mkmodel_shape_config(shape, 0, &c), 0);
	cr_assert_eq(strlen(more), c.n_layer);
	uint32_t type;
	enum quant_preset p;
	cr_assert_eq(quant_preset_parse(preset_name, &type, &p), 0, "%s", err_msg());
	for (size_t i = 0; i < mkmodel_tensor_count(&c); i++) {
		struct mkmodel_tensor t;
		mkmodel_tensor_at(&c, i, &t);
		uint32_t got = mkmodel_tensor_type(&c, &t, type, p), want = other_type;
		if (t.kind == MKMODEL_NORM)
			want = TENSOR_F32;
		else if (!strcmp(t.name, "token_embd.weight"))
			want = embd_type;
		for (size_t k = 0; k < n_ex; k++) {
			char key[64];
			snprintf(key, sizeof key, ".%s.weight", ex[k].role);
			if (!strstr(t.name, key))
				continue;
			bool high = ex[k].split < 0 ? more[t.layer] == 'H' : t.layer < (uint32_t)ex[k].split;
			want = high ? ex[k].hi : ex[k].lo;
		}
		cr_expect_eq(got, want, "%s %s %s: %s, want %s", shape, preset_name, t.name,
			     quant_ggml_type_name(got), quant_ggml_type_name(want));
	}
}

Test(quant_preset, q4_k_m_1b)
{
	/* 1152-wide rows: Q4_K -> Q5_0, Q6_K -> Q8_0; attn_output (1024) and
	 * ffn_down (6912) are multiples of 256 and keep the K types. */
	const struct expect ex[] = {
		{ "attn_v", TENSOR_Q5_0, TENSOR_Q8_0, -1 },
		{ "ffn_down", TENSOR_Q4_K, TENSOR_Q6_K, -1 },
		{ "attn_output", TENSOR_Q4_K, TENSOR_Q4_K, 0 },
	};
	check_model("1b", "q4_k_m", more_1b, ex, 3, TENSOR_Q5_0, TENSOR_Q8_0);
}

Test(quant_preset, q4_k_m_1b_counts)
{
	/* The whole 1B file, as llama-quantize writes it. */
	struct gemma3_config c;
	cr_assert_eq(mkmodel_shape_config("1b", 0, &c), 0);
	uint32_t type, n[64] = { 0 };
	enum quant_preset p;
	cr_assert_eq(quant_preset_parse("Q4_K_M", &type, &p), 0);
	cr_assert_eq(type, TENSOR_Q4_K);
	cr_assert_eq(p, QUANT_PRESET_Q4_K_M);
	for (size_t i = 0; i < mkmodel_tensor_count(&c); i++) {
		struct mkmodel_tensor t;
		mkmodel_tensor_at(&c, i, &t);
		n[mkmodel_tensor_type(&c, &t, type, p)]++;
	}
	cr_expect_eq(n[TENSOR_Q5_0], 4 * 26 + 13);  /* q, k, gate, up; v in 13 layers */
	cr_expect_eq(n[TENSOR_Q8_0], 13 + 1);       /* v in the other 13, token_embd */
	cr_expect_eq(n[TENSOR_Q4_K], 26 + 13);      /* attn_output; ffn_down */
	cr_expect_eq(n[TENSOR_Q6_K], 13);           /* ffn_down */
	cr_expect_eq(n[TENSOR_F32], 1 + 6 * 26);    /* norms */
}

Test(quant_preset, q4_k_m_4b)
{
	const struct expect ex[] = {
		{ "attn_v", TENSOR_Q4_K, TENSOR_Q6_K, -1 },
		{ "ffn_down", TENSOR_Q4_K, TENSOR_Q6_K, -1 },
	};
	check_model("4b", "q4_k_m", more_4b, ex, 2, TENSOR_Q4_K, TENSOR_Q6_K);
}

Test(quant_preset, q5_k_m)
{
	const struct expect ex1[] = {
		{ "attn_v", TENSOR_Q5_1, TENSOR_Q8_0, -1 },
		{ "ffn_down", TENSOR_Q5_K, TENSOR_Q6_K, -1 },
		{ "attn_output", TENSOR_Q5_K, TENSOR_Q5_K, 0 },
	};
	check_model("1b", "q5_k_m", more_1b, ex1, 3, TENSOR_Q5_1, TENSOR_Q8_0);
	const struct expect ex4[] = {
		{ "attn_v", TENSOR_Q5_K, TENSOR_Q6_K, -1 },
		{ "ffn_down", TENSOR_Q5_K, TENSOR_Q6_K, -1 },
	};
	check_model("4b", "Q5_K_M", more_4b, ex4, 2, TENSOR_Q5_K, TENSOR_Q6_K);
}

Test(quant_preset, q3_k_m)
{
	/* attn_v: Q5_K in layers 0-1, else Q4_K; ffn_down: Q5_K below n_layer/16
	 * (1 for 1B, 2 for 4B), else Q4_K; attn_output Q4_K; the rest Q3_K. */
	const struct expect ex1[] = {
		{ "attn_v", TENSOR_Q5_0, TENSOR_Q5_1, 2 },
		{ "ffn_down", TENSOR_Q4_K, TENSOR_Q5_K, 1 },
		{ "attn_output", TENSOR_Q4_K, TENSOR_Q4_K, 0 },
	};
	check_model("1b", "q3_k_m", more_1b, ex1, 3, TENSOR_Q4_0, TENSOR_Q8_0);
	const struct expect ex4[] = {
		{ "attn_v", TENSOR_Q4_K, TENSOR_Q5_K, 2 },
		{ "ffn_down", TENSOR_Q4_K, TENSOR_Q5_K, 2 },
		{ "attn_output", TENSOR_Q4_K, TENSOR_Q4_K, 0 },
	};
	check_model("4b", "q3_k_m", more_4b, ex4, 3, TENSOR_Q3_K, TENSOR_Q6_K);
}

Test(quant_preset, iq4_xs)
{
	/* 1B (4 query heads per KV head): attn_v Q5_K -> Q5_1 (1152 rows);
	 * ffn_down Q5_K in layers below 26/8 = 3; the 1152-wide matrices fall
	 * back to IQ4_NL, attn_output (1024) and the other ffn_down (6912) keep
	 * IQ4_XS; the tied output is Q8_0 (1152 rows). */
	const struct expect ex1[] = {
		{ "attn_v", TENSOR_Q5_1, TENSOR_Q5_1, 0 },
		{ "ffn_down", TENSOR_IQ4_XS, TENSOR_Q5_K, 3 },
		{ "attn_output", TENSOR_IQ4_XS, TENSOR_IQ4_XS, 0 },
	};
	check_model("1b", "iq4_xs", more_1b, ex1, 3, TENSOR_IQ4_NL, TENSOR_Q8_0);
	/* 4B (2 per KV head): attn_v keeps IQ4_XS; ffn_down Q5_K below 34/8 = 4 */
	const struct expect ex4[] = {
		{ "ffn_down", TENSOR_IQ4_XS, TENSOR_Q5_K, 4 },
	};
	check_model("4b", "IQ4_XS", more_4b, ex4, 1, TENSOR_IQ4_XS, TENSOR_Q6_K);
	/* the n_gqa threshold itself */
	cr_expect_eq(quant_preset_tensor_type(TENSOR_IQ4_XS, QUANT_PRESET_IQ4_XS, "blk.5.attn_v.weight", 2, 2560, 5, 34, 4),
		     TENSOR_Q5_K);
	cr_expect_eq(quant_preset_tensor_type(TENSOR_IQ4_XS, QUANT_PRESET_IQ4_XS, "blk.5.attn_v.weight", 2, 2560, 5, 34, 3),
		     TENSOR_IQ4_XS);
}

Test(quant_preset, plain_types_and_fallback)
{
	/* Plain: every matrix and the embedding take the type, then the fall-back. */
	static const struct {
		uint32_t type, narrow;
	} fb[] = {
		{ TENSOR_Q4_K, TENSOR_Q5_0 }, { TENSOR_Q5_K, TENSOR_Q5_1 }, { TENSOR_Q6_K, TENSOR_Q8_0 },
		{ TENSOR_Q2_K, TENSOR_Q4_0 }, { TENSOR_Q3_K, TENSOR_Q4_0 }, { TENSOR_IQ4_XS, TENSOR_IQ4_NL },
		{ TENSOR_Q4_0, TENSOR_Q4_0 }, { TENSOR_Q4_1, TENSOR_Q4_1 }, { TENSOR_Q5_0, TENSOR_Q5_0 },
		{ TENSOR_Q5_1, TENSOR_Q5_1 }, { TENSOR_Q8_0, TENSOR_Q8_0 }, { TENSOR_IQ4_NL, TENSOR_IQ4_NL },
		{ TENSOR_F16, TENSOR_F16 },
	};
	for (size_t i = 0; i < sizeof fb / sizeof fb[0]; i++) {
		uint32_t t = fb[i].type;
		cr_expect_eq(quant_preset_fallback(t, 2560), t);
		cr_expect_eq(quant_preset_fallback(t, 1152), fb[i].narrow, "%s", quant_ggml_type_name(t));
		cr_expect_eq(quant_preset_tensor_type(t, QUANT_PRESET_NONE, "token_embd.weight", 2, 1152, 0, 26, 1),
			     fb[i].narrow);
		cr_expect_eq(quant_preset_tensor_type(t, QUANT_PRESET_NONE, "blk.3.attn_v.weight", 2, 2560, 3, 34, 1), t);
		cr_expect_eq(quant_preset_tensor_type(t, QUANT_PRESET_NONE, "blk.3.ffn_down.weight", 2, 6912, 3, 26, 1),
			     t);
		cr_expect_eq(quant_preset_tensor_type(t, QUANT_PRESET_NONE, "blk.3.attn_norm.weight", 1, 2560, 3, 34, 1),
			     TENSOR_F32);
	}
	/* Rows not even a multiple of 32: F16, as llama.cpp */
	cr_expect_eq(quant_preset_fallback(TENSOR_Q4_K, 100), TENSOR_F16);
	cr_expect_eq(quant_preset_fallback(TENSOR_Q8_0, 100), TENSOR_Q8_0);
	/* A 2-D *_norm.weight stays f32 too */
	cr_expect_eq(quant_preset_tensor_type(TENSOR_Q4_K, QUANT_PRESET_Q4_K_M, "blk.0.attn_q_norm.weight", 2, 256, 0,
					      26, 1),
		     TENSOR_F32);
}

Test(quant_preset, parse_names_file_types)
{
	static const struct {
		const char *s;
		uint32_t type;
		enum quant_preset p;
		uint32_t ftype;
		const char *name;
	} ok[] = {
		{ "q4_k_m", TENSOR_Q4_K, QUANT_PRESET_Q4_K_M, 15, "q4_K_M" },
		{ "Q5_K_M", TENSOR_Q5_K, QUANT_PRESET_Q5_K_M, 17, "q5_K_M" },
		{ "q3_K_M", TENSOR_Q3_K, QUANT_PRESET_Q3_K_M, 12, "q3_K_M" },
		{ "f32", TENSOR_F32, QUANT_PRESET_NONE, 0, "f32" },
		{ "f16", TENSOR_F16, QUANT_PRESET_NONE, 1, "f16" },
		{ "bf16", TENSOR_BF16, QUANT_PRESET_NONE, 32, "bf16" },
		{ "q4_0", TENSOR_Q4_0, QUANT_PRESET_NONE, 2, "q4_0" },
		{ "q8_0", TENSOR_Q8_0, QUANT_PRESET_NONE, 7, "q8_0" },
		{ "q4_k", TENSOR_Q4_K, QUANT_PRESET_NONE, 15, "q4_K" },
		{ "Q6_K", TENSOR_Q6_K, QUANT_PRESET_NONE, 18, "q6_K" },
		{ "q4_1", TENSOR_Q4_1, QUANT_PRESET_NONE, 3, "q4_1" },
		{ "q5_0", TENSOR_Q5_0, QUANT_PRESET_NONE, 8, "q5_0" },
		{ "q5_1", TENSOR_Q5_1, QUANT_PRESET_NONE, 9, "q5_1" },
		{ "q2_k", TENSOR_Q2_K, QUANT_PRESET_NONE, 10, "q2_K" },
		{ "q3_k", TENSOR_Q3_K, QUANT_PRESET_NONE, 12, "q3_K" },
		{ "q5_k", TENSOR_Q5_K, QUANT_PRESET_NONE, 17, "q5_K" },
		{ "iq4_nl", TENSOR_IQ4_NL, QUANT_PRESET_NONE, 25, "iq4_nl" },
		{ "IQ4_XS", TENSOR_IQ4_XS, QUANT_PRESET_IQ4_XS, 30, "iq4_xs" },
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		uint32_t t = 99;
		enum quant_preset p = QUANT_PRESET_Q5_K_M;
		cr_expect_eq(quant_preset_parse(ok[i].s, &t, &p), 0, "%s: %s", ok[i].s, err_msg());
		cr_expect_eq(t, ok[i].type, "%s", ok[i].s);
		cr_expect_eq(p, ok[i].p, "%s", ok[i].s);
		cr_expect_eq(quant_preset_file_type(t, p), ok[i].ftype, "%s", ok[i].s);
		cr_expect_str_eq(quant_preset_name(t, p), ok[i].name);
	}
	uint32_t t;
	enum quant_preset p;
	cr_expect_eq(quant_preset_parse("q4_k_s", &t, &p), ERR_UNSUP);
	cr_expect(strstr(err_msg(), "q4_k_s") && strstr(err_msg(), "q4_k_m") && strstr(err_msg(), "iq4_xs"), "%s",
		  err_msg());
	cr_expect_eq(quant_preset_parse("", &t, &p), ERR_UNSUP);
}
