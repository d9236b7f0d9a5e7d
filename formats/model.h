/* model: one view of a Gemma 3 checkpoint, whatever its format.
 *
 * model_open() accepts a GGUF file, a Hugging Face model directory (config.json
 * + model.safetensors or a sharded index), or a .safetensors file inside such a
 * directory. Tensors are exposed under GGUF names with GGUF dimension order
 * (ne[0] fastest: a HF [out,in] weight becomes ne = {in, out}); the bytes are the
 * file's own (mapped, never copied). */
#ifndef UNICORN_MODEL_H
#define UNICORN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_LAYERS 256

enum model_format { MODEL_GGUF = 1, MODEL_HF = 2 };

struct gemma3_config {
	uint32_t n_embd;          /* hidden_size */
	uint32_t n_ff;            /* intermediate_size */
	uint32_t n_layer;
	uint32_t n_head;
	uint32_t n_head_kv;
	uint32_t head_dim;
	uint32_t sliding_window;
	uint32_t n_vocab;         /* embedding rows (262144 or 262208 for real models) */
	uint32_t n_vocab_text;    /* rows the tokenizer can produce; logits >= this are masked */
	uint32_t n_ctx;           /* max_position_embeddings / context_length */
	float eps;                /* rms_norm_eps */
	float rope_base_global;   /* rope_theta (1e6) */
	float rope_base_local;    /* rope_local_base_freq (1e4) */
	float rope_scale_global;  /* linear scaling factor for global layers; 1 = none */
	float query_pre_attn_scalar; /* attention scale = 1/sqrt(this) */
	float final_softcap;      /* 0 = none (Gemma 3) */
	bool layer_global[MODEL_MAX_LAYERS]; /* full attention (true) or sliding (false) */
};

struct model_tensor {
	char name[96];            /* GGUF name, e.g. "blk.3.attn_q.weight" */
	uint32_t type;            /* enum tensor_type */
	uint32_t n_dims;
	uint64_t ne[4];           /* GGUF order, unused dims 1 */
	uint64_t nbytes;
	const void *data;         /* mapped file bytes */
	float norm_offset;        /* norm weights: effective = stored + norm_offset (HF 1, GGUF 0) */
};

/* Per-layer tensors (pointers into model.tensors). */
struct model_layer {
	const struct model_tensor *attn_norm, *wq, *wk, *wv, *wo, *q_norm, *k_norm,
		*post_attn_norm, *ffn_norm, *ffn_gate, *ffn_up, *ffn_down, *post_ffn_norm;
};

struct model {
	char *path;
	enum model_format format;
	struct gemma3_config cfg;
	size_t n_tensors;
	struct model_tensor *tensors;
	const struct model_tensor *tok_embd;    /* [n_embd, n_vocab]; also the tied output */
	const struct model_tensor *output_norm;
	struct model_layer *layers;             /* cfg.n_layer entries */
	void *priv;                             /* format-specific handles (mappings) */
};

/* Open and validate: config keys, every required tensor present with the shape
 * the config implies, types supported. Errors name the file and field. */
int model_open(const char *path, struct model **out);
void model_close(struct model *m);
/* Range-check a configuration; label names its source in errors. */
int model_check_config(const char *label, const struct gemma3_config *c);
/* Find every required tensor with the shape cfg implies and set tok_embd,
 * output_norm and layers[] (used by model_open and by the shared-memory
 * manifest reader). label names the source in errors. */
int model_bind(struct model *m, const char *label);
const struct model_tensor *model_find(const struct model *m, const char *name);

/* Elements in a tensor (product of ne). */
uint64_t model_tensor_nelems(const struct model_tensor *t);
/* Dequantize rows [row0, row0+nrows) (a row is ne[0] elements) to f32, adding
 * norm_offset, so callers always see effective weights. */
int model_tensor_rows_f32(const struct model_tensor *t, uint64_t row0, uint64_t nrows, float *dst);

#endif
