/* quantize: convert a Gemma 3 checkpoint (GGUF or Hugging Face) into a GGUF
 * file llama.cpp loads, with matrices and the embedding in the requested type
 * or llama.cpp preset mix (tools/quant_preset.h, with its fall-back for rows
 * not a multiple of 256) and norms in f32 holding the effective weights (1+w).
 * Streams one chunk of rows at a time with a progress bar. */
#ifndef UNICORN_QUANTIZE_H
#define UNICORN_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "tools/quant_preset.h"

struct quantize_opts {
	const char *in;          /* GGUF file, HF directory or .safetensors file */
	const char *out;         /* GGUF file (written to a temporary, renamed at the end) */
	uint32_t type;           /* enum tensor_type (a preset's base type) */
	enum quant_preset preset; /* llama.cpp mix, or NONE: every matrix takes type */
	const char *vocab;       /* take the tokenizer from this GGUF instead */
	const char *tokenizer;   /* or from this tokenizer.json */
	const char *name;        /* general.name override */
	int threads;             /* 0 = CPUs */
	bool quiet;              /* no progress or warnings */
};

int quantize_run(const struct quantize_opts *o);

#endif
