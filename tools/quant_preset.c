/* quant_preset: per-tensor types for plain --type values and llama.cpp's
 * Q3_K_M / Q4_K_M / Q5_K_M / IQ4_XS mixes (see quant_preset.h). */
#include "tools/quant_preset.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "formats/quant.h"

static const struct {
	const char *name;
	enum quant_preset preset;
	uint32_t base;      /* the type of every tensor the mix does not single out */
	uint32_t file_type; /* llama_ftype */
} presets[] = {
	{ "q3_K_M", QUANT_PRESET_Q3_K_M, TENSOR_Q3_K, 12 },
	{ "q4_K_M", QUANT_PRESET_Q4_K_M, TENSOR_Q4_K, 15 },
	{ "q5_K_M", QUANT_PRESET_Q5_K_M, TENSOR_Q5_K, 17 },
	{ "iq4_xs", QUANT_PRESET_IQ4_XS, TENSOR_IQ4_XS, 30 },
};

#define N_PRESETS (sizeof presets / sizeof presets[0])

const char *quant_preset_list(void)
{
	return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, "
	       "q3_k_m, q4_k_m, q5_k_m (iq4_xs is llama-quantize's IQ4_XS mix)";
}

int quant_preset_parse(const char *s, uint32_t *type, enum quant_preset *preset)
{
	for (size_t i = 0; i < N_PRESETS; i++)
		if (!strcasecmp(s, presets[i].name)) {
			*type = presets[i].base;
			*preset = presets[i].preset;
			return 0;
		}
	uint32_t t;
	if (quant_type_parse(s, &t) == 0 && quant_type_info(t)) {
		*type = t;
		*preset = QUANT_PRESET_NONE;
		return 0;
	}
	return err_set(ERR_UNSUP, "type '%s': unknown (%s)", s, quant_preset_list());
}

const char *quant_preset_name(uint32_t type, enum quant_preset preset)
{
	for (size_t i = 0; i < N_PRESETS; i++)
		if (presets[i].preset == preset)
			return presets[i].name;
	const struct quant_type_info *ti = quant_type_info(type);
	const char *ggml = quant_ggml_type_name(type);
	return ti ? ti->name : ggml ? ggml : "?";
}

uint32_t quant_preset_file_type(uint32_t type, enum quant_preset preset)
{
	for (size_t i = 0; i < N_PRESETS; i++)
		if (presets[i].preset == preset)
			return presets[i].file_type;
	/* The ftype llama.cpp's loader guesses for a file mostly of this type
	 * (a K type reads as its _M mix). */
	switch (type) {
	case TENSOR_F32: return 0;
	case TENSOR_F16: return 1;
	case TENSOR_Q4_0: return 2;
	case TENSOR_Q4_1: return 3;
	case TENSOR_Q8_0: return 7;
	case TENSOR_Q5_0: return 8;
	case TENSOR_Q5_1: return 9;
	case TENSOR_Q2_K: return 10;
	case TENSOR_Q3_K: return 12;
	case TENSOR_Q4_K: return 15;
	case TENSOR_Q5_K: return 17;
	case TENSOR_Q6_K: return 18;
	case TENSOR_IQ4_NL: return 25;
	case TENSOR_IQ4_XS: return 30;
	case TENSOR_BF16: return 32;
	default: return 0;
	}
}

/* Types whose blocks span 256 elements (QK_K). */
static bool wide_block(uint32_t type)
{
	switch (type) {
	case TENSOR_Q2_K:
	case TENSOR_Q3_K:
	case TENSOR_Q4_K:
	case TENSOR_Q5_K:
	case TENSOR_Q6_K:
	case TENSOR_IQ4_XS:
		return true;
	default:
		return false;
	}
}

uint32_t quant_preset_fallback(uint32_t type, uint64_t ne0)
{
	if (!wide_block(type) || ne0 % QK_K == 0)
		return type;
	uint32_t narrow;
	switch (type) {
	case TENSOR_Q4_K: narrow = TENSOR_Q5_0; break;
	case TENSOR_Q5_K: narrow = TENSOR_Q5_1; break;
	case TENSOR_Q6_K: narrow = TENSOR_Q8_0; break;
	case TENSOR_IQ4_XS: narrow = TENSOR_IQ4_NL; break;
	default: narrow = TENSOR_Q4_0; break; /* Q2_K, Q3_K */
	}
	/* Every fall-back type has 32-element blocks. */
	return ne0 % 32 == 0 ? narrow : TENSOR_F16;
}

enum qp_role { QP_OTHER, QP_EMBD_OUTPUT, QP_ATTN_V, QP_ATTN_OUTPUT, QP_FFN_DOWN };

/* The roles the presets single out, by GGUF name as llama.cpp matches them. */
static enum qp_role role_of(const char *name)
{
	/* Gemma 3 ties the output to token_embd: both are "the output". */
	if (!strcmp(name, "output.weight") || !strcmp(name, "token_embd.weight"))
		return QP_EMBD_OUTPUT;
	if (strstr(name, "attn_v.weight"))
		return QP_ATTN_V;
	if (strstr(name, "attn_output.weight"))
		return QP_ATTN_OUTPUT;
	if (strstr(name, "ffn_down"))
		return QP_FFN_DOWN;
	return QP_OTHER;
}

/* llama.cpp's layers that get more bits: the first and last eighth, and every
 * third layer between them. */
static bool more_bits(uint32_t layer, uint32_t n_layer)
{
	uint32_t e = n_layer / 8;
	return layer < e || layer >= 7 * n_layer / 8 || (layer - e) % 3 == 2;
}

/* The preset's type for a tensor before the fall-back. */
static uint32_t preset_choice(uint32_t base, enum quant_preset preset, enum qp_role role, uint64_t ne0,
			      uint32_t layer, uint32_t n_layer, uint32_t n_gqa)
{
	bool q3 = preset == QUANT_PRESET_Q3_K_M;
	if (role == QP_EMBD_OUTPUT)
		/* Rows the base type cannot hold make it Q8_0 rather than a fall-back. */
		return ne0 % QK_K ? TENSOR_Q8_0 : TENSOR_Q6_K;
	if (preset == QUANT_PRESET_IQ4_XS) {
		/* (llama.cpp without an importance matrix) attn_v takes Q5_K where at
		 * least 4 query heads share a KV head (Gemma 3 1B: 4/1; 4B-27B: 2),
		 * ffn_down Q5_K in the first eighth of the layers */
		if (role == QP_ATTN_V && n_gqa >= 4)
			return TENSOR_Q5_K;
		if (role == QP_FFN_DOWN && layer < n_layer / 8)
			return TENSOR_Q5_K;
		return base;
	}
	switch (role) {
	case QP_ATTN_V:
		if (q3)
			return layer < 2 ? TENSOR_Q5_K : TENSOR_Q4_K;
		return more_bits(layer, n_layer) ? TENSOR_Q6_K : base;
	case QP_FFN_DOWN:
		if (q3)
			return layer < n_layer / 16 ? TENSOR_Q5_K : TENSOR_Q4_K;
		return more_bits(layer, n_layer) ? TENSOR_Q6_K : base;
	case QP_ATTN_OUTPUT:
		return q3 ? TENSOR_Q4_K : base;
	default:
		return base;
	}
}

uint32_t quant_preset_tensor_type(uint32_t type, enum quant_preset preset, const char *name, uint32_t n_dims,
				  uint64_t ne0, uint32_t layer, uint32_t n_layer, uint32_t n_gqa)
{
	if (n_dims < 2 || strstr(name, "_norm.weight"))
		return TENSOR_F32;
	uint32_t t = type;
	if (preset != QUANT_PRESET_NONE)
		t = preset_choice(type, preset, role_of(name), ne0, layer, n_layer, n_gqa);
	return quant_preset_fallback(t, ne0);
}
