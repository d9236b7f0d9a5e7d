/* ref: the CPU reference Gemma 3 forward pass.
 *
 * For tests only (the goldens and the shader tests compare against it); never a
 * runtime fallback. Written for clarity, llama2.c style: every weight is
 * dequantized to f32 once at creation, activations are f32, dot products and
 * softmax accumulate in double. One sequence at a time, with a KV cache that
 * grows on demand up to max_ctx positions. */
#ifndef UNICORN_REF_H
#define UNICORN_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/model.h"

/* One decoder layer, all f32. Matrices are row-major [out][in] (GGUF ne = {in, out}). */
struct ref_layer {
	float *attn_norm;       /* [n_embd] effective (1+w) weights */
	float *wq;              /* [n_head*head_dim][n_embd] */
	float *wk;              /* [n_head_kv*head_dim][n_embd] */
	float *wv;              /* [n_head_kv*head_dim][n_embd] */
	float *wo;              /* [n_embd][n_head*head_dim] */
	float *q_norm;          /* [head_dim] */
	float *k_norm;          /* [head_dim] */
	float *post_attn_norm;  /* [n_embd] */
	float *ffn_norm;        /* [n_embd] */
	float *ffn_gate;        /* [n_ff][n_embd] */
	float *ffn_up;          /* [n_ff][n_embd] */
	float *ffn_down;        /* [n_embd][n_ff] */
	float *post_ffn_norm;   /* [n_embd] */
	float *k_cache;         /* [kv_cap][n_head_kv*head_dim], RoPE already applied */
	float *v_cache;         /* [kv_cap][n_head_kv*head_dim] */
};

struct ref_model {
	/* A copy of the model's config. Tests may change it after ref_create
	 * (e.g. swap the rope bases to prove a golden test can fail); the
	 * dimensions must stay as they were. */
	struct gemma3_config cfg;
	float *tok_embd;        /* [n_vocab][n_embd]; also the tied output matrix */
	float *output_norm;     /* [n_embd] */
	struct ref_layer *layers;
	uint32_t max_ctx;       /* positions allowed: [0, max_ctx) */
	uint32_t kv_cap;        /* positions the caches hold now (grown on demand) */
	uint32_t n_past;        /* positions run so far; the next pos may be at most this */
	/* The KV cache's element type to emulate (enum kv_type, ipc/kvlayout.h):
	 * ref_create sets KV_TYPE_F32 (exact); tests set KV_TYPE_F16 or
	 * KV_TYPE_Q8_0 to round each appended k/v as the engine's cache does
	 * (f16 round to nearest even; q8_0 as ggml's quantize_row_q8_0_ref). */
	uint32_t kv_type;
	/* scratch for one token */
	float *x;               /* [n_embd] residual stream */
	float *xb;              /* [n_embd] normed input */
	float *xb2;             /* [n_embd] */
	float *q;               /* [n_head*head_dim] */
	float *att_out;         /* [n_head*head_dim] */
	float *hb;              /* [n_ff] */
	float *hb2;             /* [n_ff] */
	double *att;            /* [kv_cap] attention scores of one head */
};

/* Dequantize every weight of m to f32. max_ctx caps the positions ref_forward
 * accepts (0 = cfg.n_ctx; larger than cfg.n_ctx is clamped). The KV cache is
 * allocated lazily as positions arrive. m may be closed afterwards. */
int ref_create(const struct model *m, uint32_t max_ctx, struct ref_model **out);
void ref_destroy(struct ref_model *r);

/* Run one token at position pos and write cfg.n_vocab logits (logits NULL:
 * skip the head, for positions whose logits nobody reads). Positions
 * 0..pos-1 must have been run before in this sequence (pos <= n_past; a smaller
 * pos rewinds the sequence and overwrites its cache from there). Logits of ids
 * >= n_vocab_text are -INFINITY. Errors: ERR_INVAL for a token or position out
 * of range, ERR_STATE for a gap in positions, ERR_NOMEM when the KV cache
 * cannot grow. */
int ref_forward(struct ref_model *r, uint32_t token, uint32_t pos, float *logits);

/* A span of n rows at positions pos0.. run layer by layer: text tokens
 * (embedded and scaled by sqrt(n_embd) as ref_forward does) or embedding rows
 * embd [n][n_embd] taken as they are (an image's, from the vision tower:
 * Gemma 3 does not scale them). bidirectional: every row of the span sees
 * every other (Gemma 3's attention among one image's tokens; the sliding
 * window still limits how far back a row sees); else causal, the same
 * numbers as ref_forward row by row. logits [n][n_vocab] or NULL. Positions
 * before pos0 must have been run (pos0 <= n_past). */
int ref_forward_span(struct ref_model *r, const uint32_t *tokens, const float *embd, uint32_t n, uint32_t pos0,
		     bool bidirectional, float *logits);

/* Teacher-forced prefill from position 0: row t of logits ([n][n_vocab]) holds
 * the logits after tokens[0..t]. */
int ref_forward_tokens(struct ref_model *r, const uint32_t *tokens, size_t n, float *logits);

#endif
