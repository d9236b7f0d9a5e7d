/* Image rows in the sequence (gpu_worker/engine_image.h): a prefill chunk
 * holding an image span (random rows standing for the vision tower's) gives
 * ref_forward_span's bidirectional logits within the golden tolerance, on the
 * mat-mat and the mat-vec kinds, whether the span's chunk ends with it or
 * goes on with text; the bidirectional reference differs from the causal one
 * far more than that tolerance (so the comparison can fail); a span cut
 * between chunks, a row outside the area and image ids outside chunks are
 * refused. Golden f32 model (sliding window 8: the span reaches past it). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/model.h"
#include "gpu_worker/engine.h"
#include "gpu_worker/engine_image.h"
#include "ref/ref.h"
#include "tests/golden.h"

#define R 8      /* rows of an image */
#define PRE 20   /* text before it */
#define POST 4   /* text after it */

struct ifx {
	struct golden g;
	struct model *m;
	struct engine *e;
	uint32_t V, E;
	float *emb; /* [R][E] */
};

static void ifx_open(struct ifx *x)
{
	memset(x, 0, sizeof *x);
	cr_assert_eq(golden_load("f32", &x->g), 0, "%s", err_msg());
	cr_assert(x->g.n_tokens >= PRE + POST);
	cr_assert_eq(model_open(x->g.model_path, &x->m), 0, "%s", err_msg());
	struct engine_opts o = { .max_ctx = 64, .max_batch = 32, .n_split = 4, .max_seqs = 2, .max_rows = 160,
				 .kv_type = KV_TYPE_F32, .image_rows = R, .image_slots = 2 };
	cr_assert_eq(engine_create(x->m, &o, &x->e), 0, "engine_create: %s", err_msg());
	x->V = x->m->cfg.n_vocab;
	x->E = x->m->cfg.n_embd;
	x->emb = malloc((size_t)R * x->E * sizeof(float));
	uint64_t z = 11;
	for (size_t i = 0; i < (size_t)R * x->E; i++) {
		z = z * 6364136223846793005ull + 1442695040888963407ull;
		x->emb[i] = (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
	}
	/* slot 1 holds the image; slot 0 something else */
	float *other = calloc((size_t)R * x->E, sizeof(float));
	cr_assert_eq(engine_image_set(x->e, 0, other), 0, "%s", err_msg());
	cr_assert_eq(engine_image_set(x->e, 1, x->emb), 0, "%s", err_msg());
	free(other);
}

static void ifx_close(struct ifx *x)
{
	free(x->emb);
	engine_destroy(x->e);
	model_close(x->m);
	golden_free(&x->g);
}

static double rel_l2(const float *got, const float *want, uint32_t n)
{
	double d = 0, w = 0;
	for (uint32_t i = 0; i < n; i++)
		if (isfinite(want[i])) {
			d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
			w += (double)want[i] * want[i];
		}
	return sqrt(d / w);
}

/* the reference: PRE text, the span (bidirectional or causal), POST text;
 * span_last [V] the span's last row, post_last [V] the last row */
static void reference(struct ifx *x, bool bidir, float *span_last, float *post_last)
{
	struct ref_model *r;
	cr_assert_eq(ref_create(x->m, 64, &r), 0, "%s", err_msg());
	float *lg = malloc((size_t)PRE * x->V * sizeof(float));
	cr_assert_eq(ref_forward_tokens(r, x->g.tokens, PRE, lg), 0, "%s", err_msg());
	float *sp = malloc((size_t)R * x->V * sizeof(float));
	cr_assert_eq(ref_forward_span(r, NULL, x->emb, R, PRE, bidir, sp), 0, "%s", err_msg());
	memcpy(span_last, sp + (size_t)(R - 1) * x->V, (size_t)x->V * sizeof(float));
	float *po = malloc((size_t)POST * x->V * sizeof(float));
	cr_assert_eq(ref_forward_span(r, x->g.tokens + PRE, NULL, POST, PRE + R, false, po), 0, "%s", err_msg());
	memcpy(post_last, po + (size_t)(POST - 1) * x->V, (size_t)x->V * sizeof(float));
	free(lg);
	free(sp);
	free(po);
	ref_destroy(r);
}

Test(engine_image, span_matches_reference, .timeout = 180)
{
	struct ifx x;
	ifx_open(&x);
	float *ref_span = malloc((size_t)x.V * 4), *ref_post = malloc((size_t)x.V * 4);
	float *c_span = malloc((size_t)x.V * 4), *c_post = malloc((size_t)x.V * 4);
	reference(&x, true, ref_span, ref_post);
	reference(&x, false, c_span, c_post);
	double sep = rel_l2(c_post, ref_post, x.V);
	cr_assert(sep > 100 * x.g.rel_tol, "bidirectional and causal references differ by only %g", sep);

	uint32_t toks[R + POST], ids[1];
	for (uint32_t j = 0; j < R; j++)
		toks[j] = ENGINE_IMAGE_TOKEN | (R + j); /* slot 1 */
	memcpy(toks + R, x.g.tokens + PRE, POST * sizeof(uint32_t));
	float *got = malloc((size_t)x.V * 4);
	for (int wide = 1; wide >= 0; wide--) {
		/* sequence 0: the span and the text after it in one chunk */
		struct engine_chunk a = { 0, 0, PRE, x.g.tokens, false }, b = { 0, PRE, R + POST, toks, true };
		cr_assert_eq(engine_forward_chunks(x.e, 1, &a, wide, ENGINE_BATCH_ARGMAX, 1, ids, NULL), 0, "%s", err_msg());
		cr_assert_eq(engine_forward_chunks(x.e, 1, &b, wide, ENGINE_BATCH_LOGITS, 1, ids, got), 0, "%s", err_msg());
		double rel = rel_l2(got, ref_post, x.V);
		cr_expect(rel <= x.g.rel_tol, "wide %d: text after the span: rel %g > %g (causal would be %g)", wide, rel,
			  x.g.rel_tol, sep);
		/* sequence 1: the span alone (its last row's head), then the text */
		struct engine_chunk c = { 1, 0, PRE, x.g.tokens, false }, d = { 1, PRE, R, toks, true },
				    f = { 1, PRE + R, POST, toks + R, true };
		cr_assert_eq(engine_forward_chunks(x.e, 1, &c, wide, ENGINE_BATCH_ARGMAX, 1, ids, NULL), 0, "%s", err_msg());
		cr_assert_eq(engine_forward_chunks(x.e, 1, &d, wide, ENGINE_BATCH_LOGITS, 1, ids, got), 0, "%s", err_msg());
		rel = rel_l2(got, ref_span, x.V);
		cr_expect(rel <= x.g.rel_tol, "wide %d: the span's last row: rel %g", wide, rel);
		cr_assert_eq(engine_forward_chunks(x.e, 1, &f, wide, ENGINE_BATCH_LOGITS, 1, ids, got), 0, "%s", err_msg());
		rel = rel_l2(got, ref_post, x.V);
		cr_expect(rel <= x.g.rel_tol, "wide %d: text after a span chunk: rel %g", wide, rel);
	}
	free(got);
	free(ref_span);
	free(ref_post);
	free(c_span);
	free(c_post);
	ifx_close(&x);
}

Test(engine_image, refuses_cut_spans_and_bad_rows, .timeout = 60)
{
	struct ifx x;
	ifx_open(&x);
	uint32_t toks[2 * R + 2], ids[2];
	for (uint32_t j = 0; j < R; j++)
		toks[j] = ENGINE_IMAGE_TOKEN | j;
	/* the span's first half in one chunk */
	struct engine_chunk cut = { 0, 0, R / 2, toks, true };
	cr_expect_eq(engine_forward_chunks(x.e, 1, &cut, true, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_INVAL);
	/* starting mid-image */
	struct engine_chunk mid = { 0, 0, R / 2, toks + R / 2, true };
	cr_expect_eq(engine_forward_chunks(x.e, 1, &mid, true, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_INVAL);
	/* rows out of order */
	toks[3] = ENGINE_IMAGE_TOKEN | 5;
	struct engine_chunk order = { 0, 0, R, toks, true };
	cr_expect_eq(engine_forward_chunks(x.e, 1, &order, true, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_INVAL);
	/* slot 2 of 2 */
	for (uint32_t j = 0; j < R; j++)
		toks[j] = ENGINE_IMAGE_TOKEN | (2 * R + j);
	cr_expect_eq(engine_forward_chunks(x.e, 1, &order, true, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_RANGE);
	/* image ids only in chunks; slots only in the area */
	uint32_t seq = 0, pos = 0;
	cr_expect_eq(engine_forward_batch(x.e, 1, toks, &seq, &pos, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_INVAL);
	cr_expect_eq(engine_image_set(x.e, 2, x.emb), ERR_RANGE);
	/* two images in one chunk, text between, still run */
	for (uint32_t j = 0; j < R; j++) {
		toks[j] = ENGINE_IMAGE_TOKEN | j;
		toks[R + 2 + j] = ENGINE_IMAGE_TOKEN | (R + j);
	}
	toks[R] = x.g.tokens[0];
	toks[R + 1] = x.g.tokens[1];
	struct engine_chunk two = { 0, 0, 2 * R + 2, toks, true };
	cr_expect_eq(engine_forward_chunks(x.e, 1, &two, true, ENGINE_BATCH_ARGMAX, 1, ids, NULL), 0, "%s", err_msg());
	ifx_close(&x);
}
