/* quant_preset: which type each tensor of a Gemma 3 GGUF takes for a
 * `--type` value of `unicorn quantize` and `unicorn-mkmodel`.
 *
 * A --type is either a plain tensor type (every 2-D weight matrix and the
 * embedding take it; norms stay f32) or one of llama-quantize's mixed presets
 * Q3_K_M, Q4_K_M, Q5_K_M, which give attn_v, ffn_down in some layers,
 * attn_output (Q3_K_M) and the output matrix a higher type, and IQ4_XS
 * (llama-quantize's IQ4_XS file type without an importance matrix: attn_v
 * Q5_K where n_head / n_head_kv >= 4, ffn_down Q5_K in the first eighth of
 * the layers, the output Q6_K; `iq4_xs` names this mix, not the plain type). Gemma 3 ties its
 * output to token_embd, so token_embd takes the output's type, as llama.cpp
 * does for models without output.weight.
 *
 * Then, as in llama.cpp, a tensor whose rows (ne0) are not a multiple of a
 * 256-wide type's block falls back to a 32-wide one: Q4_K -> Q5_0,
 * Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, IQ4_XS -> IQ4_NL (and F16
 * should even that not divide the rows). Gemma 3 1B (n_embd 1152) is the case
 * that matters: its Q4_K_M file stores q/k/v/gate/up as Q5_0.
 *
 * Everything here is a pure function of its arguments. */
#ifndef UNICORN_QUANT_PRESET_H
#define UNICORN_QUANT_PRESET_H

#include <stdint.h>

enum quant_preset {
	QUANT_PRESET_NONE = 0, /* plain: every weight matrix takes the type */
	QUANT_PRESET_Q3_K_M,
	QUANT_PRESET_Q4_K_M,
	QUANT_PRESET_Q5_K_M,
	QUANT_PRESET_IQ4_XS,
};

/* A --type value: a tensor type name ("q4_0", "Q5_K", "iq4_xs", ...) or a
 * preset name ("q4_k_m", "iq4_xs", any case). Sets *type (for a preset, its
 * base type: Q3_K, Q4_K, Q5_K or IQ4_XS) and *preset. ERR_UNSUP naming the accepted values for
 * anything else. */
int quant_preset_parse(const char *s, uint32_t *type, enum quant_preset *preset);

/* "q4_K_M" for a preset, else the type's own name ("q8_0"; ggml's "Q5_K" for
 * a type this build cannot write); "?" for an id ggml never had. */
const char *quant_preset_name(uint32_t type, enum quant_preset preset);

/* The values --type accepts, for help text and errors. */
const char *quant_preset_list(void);

/* llama.h's llama_ftype for general.file_type: the preset's id (Q4_K_M 15,
 * Q5_K_M 17, Q3_K_M 12), else the id llama.cpp assigns a file made mostly of
 * that type (F32 0, F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9, Q2_K 10,
 * Q3_K 12, Q4_K 15, Q5_K 17, Q6_K 18, IQ4_NL 25, IQ4_XS 30, BF16 32). */
uint32_t quant_preset_file_type(uint32_t type, enum quant_preset preset);

/* The type a tensor of ne0-element rows takes instead of type when ne0 is not
 * a multiple of type's block (llama.cpp's fall-back); type itself when it
 * fits or has no fall-back. */
uint32_t quant_preset_fallback(uint32_t type, uint64_t ne0);

/* The type of one tensor: name is its GGUF name ("blk.3.attn_v.weight"),
 * n_dims and ne0 its rank and row length, layer its block index (ignored for
 * tensors outside a block) of n_layer, n_gqa the model's n_head / n_head_kv
 * (query heads per KV head; the IQ4_XS mix reads it). Tensors of fewer than 2 dims and
 * *_norm.weight stay F32; the rest take the preset's choice, then the
 * fall-back. */
uint32_t quant_preset_tensor_type(uint32_t type, enum quant_preset preset, const char *name, uint32_t n_dims,
				  uint64_t ne0, uint32_t layer, uint32_t n_layer, uint32_t n_gqa);

#endif
