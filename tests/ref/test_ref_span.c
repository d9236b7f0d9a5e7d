/* ref_forward_span, the reference for image tokens in the sequence: causal
 * spans give ref_forward's numbers exactly (text or the same rows passed as
 * embeddings), with the golden model's tokens; a bidirectional span lets its
 * first row see its last (a changed last row moves the first row's logits)
 * while rows before the span stay put and a causal span's first row does
 * not move; bad arguments are refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/model.h"
#include "ref/ref.h"
#include "tests/golden.h"

struct fx {
	struct golden g;
	struct model *m;
	struct ref_model *r;
	uint32_t V, E;
};

static void fx_open(struct fx *x)
{
	memset(x, 0, sizeof *x);
	cr_assert_eq(golden_load("f32", &x->g), 0, "%s", err_msg());
	cr_assert_eq(model_open(x->g.model_path, &x->m), 0, "%s", err_msg());
	cr_assert_eq(ref_create(x->m, 64, &x->r), 0, "%s", err_msg());
	x->V = x->m->cfg.n_vocab;
	x->E = x->m->cfg.n_embd;
}

static void fx_close(struct fx *x)
{
	ref_destroy(x->r);
	model_close(x->m);
	golden_free(&x->g);
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		if (isfinite(a[i]) || isfinite(b[i]))
			m = fmax(m, fabs((double)a[i] - b[i]));
	return m;
}

Test(ref_span, causal_matches_token_by_token, .timeout = 120)
{
	struct fx x;
	fx_open(&x);
	uint32_t n = x.g.n_tokens < 12 ? x.g.n_tokens : 12, split = 5;
	float *want = malloc((size_t)n * x.V * sizeof(float)), *got = malloc((size_t)n * x.V * sizeof(float));
	cr_assert_eq(ref_forward_tokens(x.r, x.g.tokens, n, want), 0, "%s", err_msg());
	/* tokens [0, split) one by one, the rest as a causal span of text */
	for (uint32_t t = 0; t < split; t++)
		cr_assert_eq(ref_forward(x.r, x.g.tokens[t], t, got + (size_t)t * x.V), 0);
	cr_assert_eq(ref_forward_span(x.r, x.g.tokens + split, NULL, n - split, split, false, got + (size_t)split * x.V), 0,
		     "%s", err_msg());
	cr_expect_eq(max_abs_diff(got, want, (size_t)n * x.V), 0.0, "text span differs");
	/* the same rows as embeddings (token rows x sqrt(n_embd), as the text path scales them) */
	float *emb = malloc((size_t)(n - split) * x.E * sizeof(float));
	for (uint32_t t = split; t < n; t++) {
		cr_assert_eq(model_tensor_rows_f32(x.m->tok_embd, x.g.tokens[t], 1, emb + (size_t)(t - split) * x.E), 0);
		for (uint32_t i = 0; i < x.E; i++)
			emb[(size_t)(t - split) * x.E + i] *= sqrtf((float)x.E);
	}
	cr_assert_eq(ref_forward_span(x.r, NULL, emb, n - split, split, false, got + (size_t)split * x.V), 0);
	cr_expect(max_abs_diff(got, want, (size_t)n * x.V) < 1e-6, "embedding span differs");
	free(emb);
	free(want);
	free(got);
	fx_close(&x);
}

Test(ref_span, bidirectional_sees_the_whole_span, .timeout = 120)
{
	struct fx x;
	fx_open(&x);
	uint32_t pre = 3, n = 6; /* an "image" of 6 rows after 3 text tokens */
	float *emb = malloc((size_t)n * x.E * sizeof(float));
	uint64_t z = 7;
	for (size_t i = 0; i < (size_t)n * x.E; i++) {
		z = z * 6364136223846793005ull + 1442695040888963407ull;
		emb[i] = (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
	}
	float *pre_a = malloc((size_t)pre * x.V * sizeof(float)), *pre_b = malloc((size_t)pre * x.V * sizeof(float));
	float *a = malloc((size_t)n * x.V * sizeof(float)), *b = malloc((size_t)n * x.V * sizeof(float));
	float *c = malloc((size_t)n * x.V * sizeof(float)), *d = malloc((size_t)n * x.V * sizeof(float));
	cr_assert_eq(ref_forward_tokens(x.r, x.g.tokens, pre, pre_a), 0);
	cr_assert_eq(ref_forward_span(x.r, NULL, emb, n, pre, true, a), 0, "%s", err_msg());
	cr_assert_eq(ref_forward_span(x.r, NULL, emb, n, pre, false, c), 0);
	/* the last row changes */
	for (uint32_t i = 0; i < x.E; i++)
		emb[(size_t)(n - 1) * x.E + i] *= -1.0f;
	cr_assert_eq(ref_forward_tokens(x.r, x.g.tokens, pre, pre_b), 0);
	cr_assert_eq(ref_forward_span(x.r, NULL, emb, n, pre, true, b), 0);
	cr_assert_eq(ref_forward_span(x.r, NULL, emb, n, pre, false, d), 0);
	cr_expect_eq(max_abs_diff(pre_a, pre_b, (size_t)pre * x.V), 0.0, "text before the span moved");
	cr_expect(max_abs_diff(a, b, x.V) > 1e-3, "bidirectional: first row did not see the last");
	cr_expect_eq(max_abs_diff(c, d, x.V), 0.0, "causal: first row saw the last");
	cr_expect(max_abs_diff(a, c, x.V) > 1e-3, "bidirectional equals causal");
	cr_expect_eq(ref_forward_span(x.r, NULL, NULL, n, pre, true, a), ERR_INVAL);
	cr_expect_eq(ref_forward_span(x.r, NULL, emb, n, 100, true, a), ERR_STATE);
	free(emb);
	free(pre_a);
	free(pre_b);
	free(a);
	free(b);
	free(c);
	free(d);
	fx_close(&x);
}
