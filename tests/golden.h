/* golden: the reference logits of ../shared/golden/ and the checks that any
 * engine (CPU reference, Vulkan) must pass against them.
 *
 * gemma3-tiny.json names, per encoding ("f32", "q8_0", "q4_0", "hf"), the model
 * file and a float32 [n_tokens][n_vocab] logits file computed in float64 from
 * that file's own dequantized weights. Tolerances (golden/README.md), per
 * position: relative L2 error <= 1e-4 and equal argmax everywhere for f32
 * weights; <= 5e-3 and equal argmax wherever the reference top-1 leads the
 * runner-up by >= 0.02 for quantized weights. */
#ifndef UNICORN_TESTS_GOLDEN_H
#define UNICORN_TESTS_GOLDEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GOLDEN_PATH_MAX 4096

struct golden {
	char enc[16];                   /* "f32", "q8_0", "q4_0", "hf" */
	char model_path[GOLDEN_PATH_MAX]; /* GGUF file or HF directory, for model_open */
	uint32_t n_tokens;
	uint32_t *tokens;               /* [n_tokens] input ids */
	uint32_t *greedy_next;          /* [n_tokens] reference argmax per position */
	uint32_t n_vocab;
	float *logits;                  /* [n_tokens][n_vocab] reference */
	double rel_tol;                 /* max relative L2 error per position */
	double tie_margin;              /* argmax compared where top-1 leads by >= this (0: always) */
};

/* Per-position result of golden_check_row. */
struct golden_row {
	double rel;                     /* ||ours - ref|| / ||ref|| (INFINITY on non-finite mismatch) */
	uint32_t argmax_ours, argmax_ref;
	double ref_lead;                /* reference top-1 minus runner-up */
	bool argmax_checked;            /* ref_lead >= tie_margin */
	bool ok;                        /* rel <= rel_tol and (argmax equal or not checked) */
};

/* Summary of golden_check_all over every position. */
struct golden_summary {
	double max_rel;
	uint32_t worst_pos;             /* position of max_rel */
	uint32_t n_fail;                /* positions failing tolerance or argmax */
	uint32_t first_fail;            /* first failing position (n_tokens if none) */
	uint32_t n_argmax_checked;
};

/* The shared folder: $UNICORN_SHARED, else "../shared". */
const char *golden_shared_dir(void);

/* Load encoding enc; returns 0 or a negative ERR_* code with err_msg() set. */
int golden_load(const char *enc, struct golden *g);
void golden_free(struct golden *g);

/* Compare one row of logits (n_vocab floats) for position t. Ids where both
 * ours and the reference are -inf (masked) count as equal. */
void golden_check_row(const struct golden *g, uint32_t t, const float *ours, struct golden_row *res);

/* Compare all rows of ours ([n_tokens][n_vocab]). Returns true if every position passes. */
bool golden_check_all(const struct golden *g, const float *ours, struct golden_summary *s);

/* Index of the largest value of x[0..n) (first on ties; -inf and NaN skipped). */
uint32_t golden_argmax(const float *x, uint32_t n);

#endif
