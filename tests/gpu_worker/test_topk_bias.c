/* logit_bias and the structured-output mask on the GPU (engine_chunk_bias,
 * shaders/topk.comp): the top-k of a chunks step whose head rows carry
 * biases and masks equals the CPU's top-k of the same step's logit rows
 * plus the biases, masked tokens -inf (ids exact, values within 1e-4),
 * for prompt chunks and one-token chunks together; rows without biases and
 * the next step are untouched; bad bias lists are refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/model.h"
#include "gpu_worker/engine.h"
#include "tests/golden.h"

#define K 16

/* The CPU's k best of row[0..n) (descending, ties to the lower id). */
static void cpu_topk(const float *row, uint32_t n, uint32_t *ids, float *vals)
{
	uint32_t have = 0;
	for (uint32_t i = 0; i < n; i++) {
		float v = row[i];
		if (!(v > -INFINITY) || (have == K && !(v > vals[K - 1])))
			continue;
		uint32_t j = have < K ? have++ : K - 1;
		while (j > 0 && v > vals[j - 1]) {
			vals[j] = vals[j - 1];
			ids[j] = ids[j - 1];
			j--;
		}
		vals[j] = v;
		ids[j] = i;
	}
}

Test(topk_bias, gpu_topk_adds_biases_as_the_cpu, .timeout = 120)
{
	struct golden g;
	struct model *m;
	struct engine *e;
	cr_assert_eq(golden_load("q4_0", &g), 0, "%s", err_msg());
	cr_assert_eq(model_open(g.model_path, &m), 0, "%s", err_msg());
	struct engine_opts o = { .max_ctx = 64, .max_batch = 32, .n_split = 4, .max_seqs = 4, .max_rows = 64 };
	cr_assert_eq(engine_create(m, &o, &e), 0, "%s", err_msg());
	const uint32_t V = g.n_vocab, nt = m->cfg.n_vocab_text && m->cfg.n_vocab_text <= V ? m->cfg.n_vocab_text : V;
	uint32_t tok[6] = { 2, 651, 1402, 2, 3120, 9 };
	/* a prompt chunk of 3, a lone token, a chunk of 2: each with a head */
	struct engine_chunk ch[3] = { { 0, 0, 3, tok, true }, { 1, 0, 1, tok + 3, true }, { 2, 0, 2, tok + 4, true } };
	float *rows = malloc((size_t)3 * V * sizeof *rows);
	cr_assert_eq(engine_forward_chunks(e, 3, ch, false, ENGINE_BATCH_LOGITS, 0, NULL, rows), 0, "%s", err_msg());
	/* biases: row 0 bans its argmax and lifts a low token to the top,
	 * row 2 nudges a few; row 1 has none */
	uint32_t am0 = 0;
	for (uint32_t i = 1; i < nt; i++)
		am0 = rows[i] > rows[am0] ? i : am0;
	uint32_t lo = am0 == 5 ? 6 : 5;
	uint32_t id0[3] = { lo < am0 ? lo : am0, 0, 0 }, id2[4] = { 3, 40, 700, nt - 1 };
	float b0[3], b2[4] = { 2.5f, -1.0f, 7.0f, 30.0f };
	id0[1] = lo < am0 ? am0 : lo;
	b0[0] = id0[0] == am0 ? -100.0f : 100.0f;
	b0[1] = id0[1] == am0 ? -100.0f : 100.0f;
	id0[2] = nt - 2;
	b0[2] = 0.5f;
	if (id0[2] <= id0[1]) { /* a tiny vocabulary: keep them ascending */
		id0[2] = id0[1] + 1;
	}
	float *biased = malloc((size_t)3 * V * sizeof *biased);
	memcpy(biased, rows, (size_t)3 * V * sizeof *rows);
	for (int j = 0; j < 3; j++)
		biased[id0[j]] += b0[j];
	for (int j = 0; j < 4; j++)
		biased[2 * (size_t)V + id2[j]] += b2[j];
	cr_assert_eq(engine_chunk_bias(e, 0, id0, b0, 3, NULL), 0, "%s", err_msg());
	/* masks (structured output): row 1 alone, row 2 with its biases */
	size_t mw = (V + 31) / 32;
	uint32_t *m1 = calloc(mw, 4), *m2 = calloc(mw, 4);
	for (uint32_t t = 0; t < V; t++) {
		if (t % 7 == 3)
			m1[t / 32] |= 1u << (t % 32);
		if (t % 3 == 0 || t == 40)
			m2[t / 32] |= 1u << (t % 32);
	}
	for (uint32_t t = 0; t < V; t++) {
		if (!(m1[t / 32] >> (t % 32) & 1))
			biased[V + t] = -INFINITY;
		if (!(m2[t / 32] >> (t % 32) & 1))
			biased[2 * (size_t)V + t] = -INFINITY;
	}
	cr_assert_eq(engine_chunk_bias(e, 1, NULL, NULL, 0, m1), 0, "%s", err_msg());
	cr_assert_eq(engine_chunk_bias(e, 2, id2, b2, 4, m2), 0, "%s", err_msg());
	uint32_t ids[3 * K];
	float vals[3 * K];
	cr_assert_eq(engine_forward_chunks(e, 3, ch, false, ENGINE_BATCH_TOPK, K, ids, vals), 0, "%s", err_msg());
	for (uint32_t r = 0; r < 3; r++) {
		uint32_t ci[K];
		float cv[K];
		cpu_topk(biased + (size_t)r * V, nt, ci, cv);
		for (uint32_t i = 0; i < K; i++) {
			cr_assert_eq(ids[r * K + i], ci[i], "row %u rank %u: GPU id %u, CPU %u", r, i, ids[r * K + i], ci[i]);
			cr_assert_float_eq(vals[r * K + i], cv[i], 1e-4f, "row %u rank %u", r, i);
		}
	}
	cr_assert_eq(ids[0], lo, "the lifted token leads row 0");
	for (uint32_t i = 0; i < K; i++) {
		cr_assert_eq(ids[K + i] % 7, 3, "row 1: masked token %u ranked", ids[K + i]);
		cr_assert(ids[2 * K + i] % 3 == 0 || ids[2 * K + i] == 40, "row 2: masked token %u ranked", ids[2 * K + i]);
	}
	/* the biases were for that call only */
	cr_assert_eq(engine_forward_chunks(e, 3, ch, false, ENGINE_BATCH_TOPK, K, ids, vals), 0, "%s", err_msg());
	for (uint32_t r = 0; r < 3; r++) {
		uint32_t ci[K];
		float cv[K];
		cpu_topk(rows + (size_t)r * V, nt, ci, cv);
		for (uint32_t i = 0; i < K; i++)
			cr_assert_eq(ids[r * K + i], ci[i], "unbiased row %u rank %u", r, i);
	}
	/* refused: ids out of order, out of the vocabulary, a bias that is not
	 * finite; biases with an argmax head */
	uint32_t bad_order[2] = { 9, 4 }, bad_id[1] = { V };
	float two[2] = { 1, 1 }, inf[1] = { INFINITY };
	cr_assert_eq(engine_chunk_bias(e, 0, bad_order, two, 2, NULL), ERR_INVAL);
	cr_assert_eq(engine_chunk_bias(e, 0, bad_id, two, 1, NULL), ERR_INVAL);
	cr_assert_eq(engine_chunk_bias(e, 0, id2, inf, 1, NULL), ERR_INVAL);
	cr_assert_eq(engine_chunk_bias(e, 0, id2, b2, ENGINE_BIAS_MAX + 1, NULL), ERR_INVAL);
	cr_assert_eq(engine_chunk_bias(e, 1, id2, b2, 2, NULL), 0);
	cr_assert_eq(engine_forward_chunks(e, 3, ch, false, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_INVAL);
	free(rows);
	free(biased);
	free(m1);
	free(m2);
	engine_destroy(e);
	model_close(m);
	golden_free(&g);
}
