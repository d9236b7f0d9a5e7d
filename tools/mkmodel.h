/* mkmodel: synthetic Gemma 3 checkpoints (random weights, real shapes) and the
 * pieces `unicorn quantize` shares with it: the Gemma 3 tensor list, the
 * GGUF metadata for a struct gemma3_config, tokenizer vocabularies and the
 * table of shapes.
 *
 * Weights are a pure function of (seed, tensor index, element index), so files
 * are byte-identical for a seed however they are chunked or threaded. */
#ifndef UNICORN_MKMODEL_H
#define UNICORN_MKMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "formats/mmproj.h"
#include "formats/model.h"
#include "tools/quant_preset.h"

/* ---- shapes ---- */

/* "tiny" (the golden config), "1b", "4b", "12b", "27b". layers 0 = the
 * shape's own count. ERR_INVAL for an unknown shape. */
int mkmodel_shape_config(const char *shape, uint32_t layers, struct gemma3_config *cfg);

/* ---- tensor list (GGUF order of the golden files) ---- */

enum mkmodel_kind { MKMODEL_EMBED, MKMODEL_NORM, MKMODEL_MATRIX };

struct mkmodel_tensor {
	char name[64];      /* GGUF name */
	char hf_name[96];   /* Hugging Face name (Gemma3ForCausalLM) */
	enum mkmodel_kind kind;
	uint32_t layer;     /* block index of blk.N tensors (0 for the others) */
	uint32_t n_dims;
	uint64_t ne[2];     /* GGUF order: ne[0] = row length (fan-in) */
};

size_t mkmodel_tensor_count(const struct gemma3_config *cfg);
/* Tensor i (0 <= i < count): token_embd, output_norm, then per layer
 * q, k, v, output, gate, up, down, attn_norm, post_attention_norm, ffn_norm,
 * post_ffw_norm, q_norm, k_norm. */
void mkmodel_tensor_at(const struct gemma3_config *cfg, size_t i, struct mkmodel_tensor *t);

/* ---- GGUF metadata ---- */

/* general.* and gemma3.* keys exactly as llama.cpp's converter writes them;
 * file_type is general.file_type (quant_preset_file_type). */
int mkmodel_gguf_config(struct gguf_writer *w, const struct gemma3_config *cfg, const char *name,
			uint32_t file_type);
/* The GGUF type of tensor t for --type (type, preset): norms f32, the rest
 * by quant_preset_tensor_type (the preset's mix, then the 256 fall-back). */
uint32_t mkmodel_tensor_type(const struct gemma3_config *cfg, const struct mkmodel_tensor *t, uint32_t type,
			     enum quant_preset preset);

/* ---- tokenizer vocabularies ---- */

enum mkmodel_token_type {
	MKMODEL_TOK_NORMAL = 1, MKMODEL_TOK_UNKNOWN = 2, MKMODEL_TOK_CONTROL = 3,
	MKMODEL_TOK_USER_DEFINED = 4, MKMODEL_TOK_UNUSED = 5, MKMODEL_TOK_BYTE = 6,
};

struct mkmodel_vocab {
	uint64_t n;
	const char **tokens;     /* token text (not NUL-terminated when from a GGUF) */
	uint64_t *lens;
	float *scores;
	int32_t *types;
	uint32_t bos, eos, unk, pad;
	bool has_pad;
	char *chat_template;     /* NULL if none */
	char *source;            /* where it came from (messages) */
	/* owned storage */
	char *blob;
	char *pad_blob;          /* names of [PADi] rows */
	struct gguf *src;
};

/* A Hugging Face tokenizer.json (BPE with byte fallback, as Gemma 3's):
 * tokens in id order, score = -rank of the first merge producing the token
 * (0 if none), types from added_tokens (special -> control, else
 * user-defined), <0xXX> -> byte, the unk token -> unknown. Reads
 * tokenizer_config.json next to it for chat_template. */
int mkmodel_vocab_from_tokenizer_json(const char *path, struct mkmodel_vocab *v);
/* tokenizer.ggml.* arrays and special ids of a GGUF file. */
int mkmodel_vocab_from_gguf(const char *path, struct mkmodel_vocab *v);
/* <pad> <eos> <bos> <unk>, the byte tokens <0x00>..<0xFF>, then "<tok_N>"
 * (for when no vocabulary is found). */
int mkmodel_vocab_synthetic(uint64_t n, struct mkmodel_vocab *v);
/* Make the vocabulary exactly n rows (llama.cpp wants one token per
 * embedding row): pad with "[PADi]" unused tokens, or drop trailing added
 * (control/user-defined/unused) tokens such as Gemma 3's <image_soft_token>
 * (id 262144, only in the 262208-row multimodal embedding). ERR_RANGE when
 * normal tokens would have to go. */
int mkmodel_vocab_fit(struct mkmodel_vocab *v, uint64_t n);
/* tokenizer.ggml.* keys (model "llama", pre "default", add_bos true,
 * add_eos false, add_space_prefix false) and tokenizer.chat_template. */
int mkmodel_vocab_write_gguf(struct gguf_writer *w, const struct mkmodel_vocab *v);
void mkmodel_vocab_free(struct mkmodel_vocab *v);

/* Default locations, searched relative to the working directory, $UNICORN_SHARED
 * and the executable: Gemma 3's tokenizer.json and the Llama SPM vocabulary
 * GGUF. NULL when not found; returned strings are malloc'd. */
char *mkmodel_find_gemma3_tokenizer(void);
char *mkmodel_find_llama_vocab(void);

/* ---- random weights ---- */

/* Fill n values of tensor tensor_index, elements [first, first+n), raw HF
 * values (norm weights are w, effective 1+w). */
void mkmodel_fill(const struct gemma3_config *cfg, uint64_t seed, size_t tensor_index,
		  uint64_t first, float *dst, uint64_t n);

/* ---- the tool ---- */

enum mkmodel_format { MKMODEL_GGUF = 1, MKMODEL_HF = 2 };

struct mkmodel_opts {
	const char *shape;        /* default "tiny" */
	uint32_t layers;          /* 0 = shape default */
	uint32_t ctx;             /* context length; 0 = shape default (--ctx) */
	uint32_t type;            /* enum tensor_type (a preset's base type) */
	enum quant_preset preset; /* a llama.cpp mix (GGUF only); NONE = plain type */
	uint64_t seed;
	enum mkmodel_format format;
	const char *out;          /* GGUF file, or HF directory (created) */
	const char *tokenizer;    /* tokenizer.json override (real shapes) */
	const char *vocab;        /* vocabulary GGUF override */
	bool synthetic_vocab;     /* never look for a vocabulary */
	const char *name;         /* general.name; default "synthetic-gemma3-<shape>" */
	int threads;              /* 0 = number of CPUs (max 8) */
	bool quiet;               /* no progress output */
	bool vision;              /* also write mmproj-<name>.gguf beside a GGUF model */
};

int mkmodel_run(const struct mkmodel_opts *o);

/* ---- the vision tower (mkmodel_vision.c) ---- */

/* The vision shape that goes with a text shape: tiny* and demo get a tiny
 * tower (112 px, 14 px patches, 64 wide, 2 layers, 16 tokens), 4b/12b/27b
 * Gemma 3's SigLIP (896 px, 1152 wide, 27 layers, 256 tokens). text_embd is
 * the projection's width. ERR_INVAL for 1b (no vision). */
int mkmodel_vision_config(const char *shape, uint32_t text_embd, struct vision_config *c);
/* dir/mmproj-<model base name without .gguf>.gguf; malloc'd, NULL when out of memory. */
char *mkmodel_mmproj_path(const char *model_path);
/* Write a random-weight mmproj GGUF in llama.cpp's gemma3 layout. Matrices
 * are f32 when mat_type is f32, else f16 (the patch embedding, positions,
 * norms and biases are f32, as llama.cpp's converter writes them). */
int mkmodel_write_mmproj(const char *path, const struct vision_config *c, uint32_t mat_type, uint64_t seed,
			 int threads, bool quiet);

/* Stream one tensor: rows come from src as f32 (chunks of rows, called from
 * several threads at once on disjoint ranges), `add` is added to every value
 * (GGUF norms: 1+w), they are converted to type and handed to sink in order.
 * Memory: one chunk of about 4M elements. */
struct progress;
struct mkmodel_stream {
	uint64_t ne0, nrows;
	uint32_t type;
	float add;
	int (*src)(void *arg, uint64_t row0, uint64_t nrows, float *dst);
	void *src_arg;
	int (*sink)(void *arg, const void *p, size_t n);
	void *sink_arg;
	struct progress *prog;    /* may be NULL */
	int threads;              /* 0 = CPUs */
	const char *what;         /* tensor name for errors */
};
int mkmodel_stream_tensor(const struct mkmodel_stream *s);

/* Shared with quantize: run fn(arg, i) for i in [0, n) on up to `threads`
 * threads (0 = CPUs). fn returns 0 or an ERR_* code; the first error wins. */
int mkmodel_parallel(int threads, size_t n, int (*fn)(void *arg, size_t i), void *arg);

#endif
