/* logprobs: the top-k kernel's log-sum-exp of the whole logit row
 * (engine_topk_lse), the number the coordinator subtracts from a logit to
 * get a token's logprob. Checked on lavapipe against a float64 log-sum-exp
 * of the CPU reference's logits (ref/ref.c), and, tighter, of the engine's
 * own logits of the same step (that isolates the reduction from the model
 * error), for a lone token (engine_topk) and for every row of a batch. Also
 * the OpenAI side: parsing logprobs/top_logprobs and the JSON objects. The
 * end-to-end check (the openai npm client against a cluster) is in
 * tests/openai_client.mjs (http/openai_api). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/openai.h"
#include "gpu_worker/engine.h"
#include "common/err.h"
#include "formats/model.h"
#include "ref/ref.h"
#include "tests/golden.h"

static double lse_of(const float *x, size_t n)
{
	double m = -INFINITY, s = 0;
	for (size_t i = 0; i < n; i++)
		if (x[i] > m)
			m = x[i];
	for (size_t i = 0; i < n; i++)
		if (x[i] > -INFINITY)
			s += exp((double)x[i] - m);
	return m + log(s);
}

/* f32 weights: the golden tolerance is rel L2 <= 1e-4 over the logits, so
 * the lse (a smooth max) of GPU and reference agree to about that times the
 * logits' scale; the reduction itself (GPU lse vs float64 lse of the GPU's
 * own logits) must be near float rounding. */
#define TOL_REF 2e-3
#define TOL_SELF 2e-5

Test(logprobs, lse_matches_reference, .timeout = 120)
{
	struct golden g;
	struct model *m;
	struct engine *e;
	cr_assert_eq(golden_load("f32", &g), 0, "%s", err_msg());
	cr_assert_eq(model_open(g.model_path, &m), 0, "%s", err_msg());
	struct engine_opts o = { .max_ctx = 64, .max_batch = 8, .n_split = 4, .max_seqs = 4 };
	cr_assert_eq(engine_create(m, &o, &e), 0, "%s", err_msg());
	struct ref_model *r;
	cr_assert_eq(ref_create(m, 64, &r), 0, "%s", err_msg());
	size_t V = g.n_vocab;
	float *lg = malloc(V * sizeof *lg), *rl = malloc(10 * V * sizeof *rl); /* ref rows: [n][V] */
	cr_assert(lg && rl);
	float lse;
	/* nothing computed yet: refused, not garbage */
	cr_assert_eq(engine_topk_lse(e, 1, &lse), ERR_STATE);

	/* lone token: 10 prompt tokens (prefill chunks of 8 + 2), top-k head */
	uint32_t ids[64];
	float vals[64];
	cr_assert_eq(engine_topk(e, g.tokens, 10, 0, 64, ids, vals), 0, "%s", err_msg());
	cr_assert_eq(engine_topk_lse(e, 1, &lse), 0, "%s", err_msg());
	cr_assert_eq(engine_topk_lse(e, 2, &lse), ERR_STATE); /* one row only */
	cr_assert_eq(ref_forward_tokens(r, g.tokens, 10, rl), 0, "%s", err_msg());
	double want = lse_of(rl + 9 * V, V);
	cr_assert(isfinite(lse) && fabs(lse - want) <= TOL_REF * fmax(1, fabs(want)), "lse %.6f vs reference %.6f",
		  (double)lse, want);
	/* the top logit's logprob is <= 0 and the 64 probabilities sum to <= 1 */
	double mass = 0;
	for (int i = 0; i < 64; i++)
		mass += exp((double)vals[i] - lse);
	cr_assert(vals[0] - lse <= 1e-5 && mass <= 1 + 1e-5 && mass > 0, "top %.6f mass %.6f", vals[0] - lse, mass);
	/* same step's own logits (a forward replays the same kernels) */
	cr_assert_eq(engine_reset(e), 0);
	cr_assert_eq(engine_forward(e, g.tokens, 10, 0, lg, false), 0, "%s", err_msg());
	double self = lse_of(lg, V);
	cr_assert(fabs(lse - self) <= TOL_SELF * fmax(1, fabs(self)), "lse %.7f vs own logits %.7f", (double)lse, self);
	/* other modes leave the last top-k's lse */
	uint32_t am;
	cr_assert_eq(engine_argmax(e, g.tokens + 10, 1, 10, &am), 0, "%s", err_msg());
	float again;
	cr_assert_eq(engine_topk_lse(e, 1, &again), 0);
	cr_assert_eq(again, lse);

	/* batch: 3 sequences, rows at positions 0, 3 and 9 (past the window) */
	cr_assert_eq(engine_reset(e), 0);
	const uint32_t *t = g.tokens;
	cr_assert_eq(engine_seq_select(e, 1), 0);
	cr_assert_eq(engine_forward(e, t + 20, 3, 0, NULL, false), 0, "%s", err_msg());
	cr_assert_eq(engine_seq_select(e, 2), 0);
	cr_assert_eq(engine_forward(e, t + 30, 9, 0, NULL, false), 0, "%s", err_msg());
	const uint32_t bt[3] = { t[5], t[23], t[39] }, bs[3] = { 0, 1, 2 }, bp[3] = { 0, 3, 9 };
	uint32_t b_ids[3 * 8];
	float b_vals[3 * 8], b_lse[3];
	cr_assert_eq(engine_forward_batch(e, 3, bt, bs, bp, ENGINE_BATCH_TOPK, 8, b_ids, b_vals), 0, "%s", err_msg());
	cr_assert_eq(engine_topk_lse(e, 3, b_lse), 0, "%s", err_msg());
	const uint32_t *seqs[3] = { t + 5, t + 20, t + 30 };
	for (uint32_t i = 0; i < 3; i++) {
		/* the reference runs each sequence from scratch */
		ref_destroy(r);
		cr_assert_eq(ref_create(m, 64, &r), 0, "%s", err_msg());
		cr_assert_eq(ref_forward_tokens(r, seqs[i], bp[i] + 1, rl), 0, "%s", err_msg());
		want = lse_of(rl + bp[i] * V, V);
		cr_assert(isfinite(b_lse[i]) && fabs(b_lse[i] - want) <= TOL_REF * fmax(1, fabs(want)),
			  "batch row %u: lse %.6f vs reference %.6f", i, (double)b_lse[i], want);
		cr_assert(b_vals[i * 8] <= b_lse[i], "row %u: top logit above the lse", i);
	}
	free(lg);
	free(rl);
	ref_destroy(r);
	engine_destroy(e);
	model_close(m);
	golden_free(&g);
}

/* ---- the OpenAI side: parsing and the logprobs objects (api/openai.c) ---- */

static int parse(int kind, const char *body, struct oai_req *r, struct oai_err *e)
{
	return oai_parse(kind, body, strlen(body), r, e);
}

Test(logprobs, parse)
{
	struct oai_req r;
	struct oai_err e;
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
				     "\"top_logprobs\":20}", &r, &e), 0, "%s", e.message);
	cr_assert(r.logprobs);
	cr_assert_eq(r.top_logprobs, 20);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":false}",
			   &r, &e), 0, "%s", e.message);
	cr_assert(!r.logprobs);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":0}", &r, &e), 0, "%s", e.message);
	cr_assert(r.logprobs);
	cr_assert_eq(r.top_logprobs, 0);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":5}", &r, &e), 0, "%s", e.message);
	cr_assert(r.logprobs);
	cr_assert_eq(r.top_logprobs, 5);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":null}", &r, &e), 0, "%s", e.message);
	cr_assert(!r.logprobs);
	oai_req_free(&r);
	/* top_logprobs without logprobs: OpenAI's 400 naming the parameter */
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":false,"
				     "\"top_logprobs\":1}", &r, &e), -1);
	cr_assert_eq(e.status, 400);
	cr_assert_str_eq(e.param, "top_logprobs");
}

/* Two tokens: "Hi" (valid UTF-8) and a lone 0xE2 byte (part of a character):
 * the second is spelled "bytes:\xe2" and its bytes array has the real byte. */
static void two_tokens(struct oai_lp_tok t[2])
{
	memset(t, 0, 2 * sizeof *t);
	t[0].bytes = strdup("Hi");
	t[0].len = 2;
	t[0].logprob = -0.25f;
	t[0].text_offset = 0;
	t[0].n_top = 2;
	t[0].top[0].bytes = strdup("Hi");
	t[0].top[0].len = 2;
	t[0].top[0].logprob = -0.25f;
	t[0].top[1].bytes = strdup(" Hello");
	t[0].top[1].len = 6;
	t[0].top[1].logprob = -2.0f;
	t[1].bytes = strdup("\xe2");
	t[1].len = 1;
	t[1].logprob = -INFINITY; /* JSON has no -inf */
	t[1].text_offset = 2;
}

Test(logprobs, chat_json)
{
	struct oai_lp_tok t[2];
	two_tokens(t);
	char *s = oai_response_json_lp(OAI_CHAT, "id", 1, "m", "Hi", 2, "stop", 3, 2, true, t, 2);
	cr_assert_not_null(s);
	json_error_t je;
	json_t *o = json_loads(s, 0, &je);
	cr_assert_not_null(o, "%s", s);
	json_t *c = json_object_get(json_object_get(json_array_get(json_object_get(o, "choices"), 0), "logprobs"),
				    "content");
	cr_assert_eq(json_array_size(c), 2, "%s", s);
	json_t *a = json_array_get(c, 0), *b = json_array_get(c, 1);
	cr_assert_str_eq(json_string_value(json_object_get(a, "token")), "Hi");
	cr_assert_float_eq(json_real_value(json_object_get(a, "logprob")), -0.25, 1e-9);
	cr_assert_eq(json_array_size(json_object_get(a, "bytes")), 2);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(a, "bytes"), 0)), 'H');
	json_t *top = json_object_get(a, "top_logprobs");
	cr_assert_eq(json_array_size(top), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(top, 1), "token")), " Hello");
	cr_assert_str_eq(json_string_value(json_object_get(b, "token")), "bytes:\\xe2");
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(b, "bytes"), 0)), 0xe2);
	cr_assert_float_eq(json_real_value(json_object_get(b, "logprob")), -9999.0, 1e-9);
	cr_assert_eq(json_array_size(json_object_get(b, "top_logprobs")), 0);
	json_decref(o);
	free(s);
	/* without logprobs asked: null; a stream chunk without tokens: null */
	s = oai_response_json_lp(OAI_CHAT, "id", 1, "m", "Hi", 2, "stop", 3, 2, false, t, 2);
	cr_assert_not_null(strstr(s, "\"logprobs\":null"), "%s", s);
	free(s);
	s = oai_chunk_json_lp(OAI_CHAT, "id", 1, "m", "", 0, true, NULL, NULL, 0);
	cr_assert_not_null(strstr(s, "\"logprobs\":null"), "%s", s);
	free(s);
	s = oai_chunk_json_lp(OAI_CHAT, "id", 1, "m", "Hi", 2, false, NULL, t, 1);
	cr_assert_not_null(strstr(s, "\"logprobs\":{\"content\":[{"), "%s", s);
	free(s);
	oai_lp_tok_free(&t[0]);
	oai_lp_tok_free(&t[1]);
}

Test(logprobs, completion_json)
{
	struct oai_lp_tok t[2];
	two_tokens(t);
	char *s = oai_logprobs_json(OAI_COMPLETION, t, 2);
	cr_assert_not_null(s);
	json_error_t je;
	json_t *o = json_loads(s, 0, &je);
	cr_assert_not_null(o, "%s", s);
	cr_assert_eq(json_array_size(json_object_get(o, "tokens")), 2, "%s", s);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "tokens"), 0)), "Hi");
	cr_assert_float_eq(json_real_value(json_array_get(json_object_get(o, "token_logprobs"), 0)), -0.25, 1e-9);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(o, "text_offset"), 1)), 2);
	json_t *d0 = json_array_get(json_object_get(o, "top_logprobs"), 0);
	cr_assert_eq(json_object_size(d0), 2, "%s", s); /* "Hi" (also the sampled one) and " Hello" */
	cr_assert_float_eq(json_real_value(json_object_get(d0, " Hello")), -2.0, 1e-9);
	/* no alternatives asked: the sampled token alone */
	json_t *d1 = json_array_get(json_object_get(o, "top_logprobs"), 1);
	cr_assert_eq(json_object_size(d1), 1, "%s", s);
	cr_assert_not_null(json_object_get(d1, "bytes:\\xe2"), "%s", s);
	json_decref(o);
	free(s);
	oai_lp_tok_free(&t[0]);
	oai_lp_tok_free(&t[1]);
}
