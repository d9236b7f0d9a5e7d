/* The Vulkan engine (lavapipe in CI) against the float64 goldens and the CPU
 * reference: whole-model logits, greedy decoding, chunked prefill, the
 * single-stage entry points and the sliding window. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_worker/engine.h"
#include "gpu_worker/vk.h"
#include "common/err.h"
#include "formats/model.h"
#include "ref/ref.h"
#include "tests/golden.h"

struct fx {
	struct golden g;
	struct model *m;
	struct engine *e;
};

/* The golden model of encoding enc in an engine with options o. */
/* q4_0 engines upload their weights unless told otherwise: regrouped, with
 * the x16 kernels where the device has integer dot products, the path a
 * discrete GPU takes (lavapipe would import them in place, in the file's
 * layout); the f32 and q8_0 engines keep the import. */
static void fx_open_opts(struct fx *x, const char *enc, const struct engine_opts *o)
{
	memset(x, 0, sizeof *x);
	cr_assert_eq(golden_load(enc, &x->g), 0, "golden_load(%s): %s", enc, err_msg());
	cr_assert_eq(model_open(x->g.model_path, &x->m), 0, "model_open: %s", err_msg());
	struct engine_opts oo = *o;
	if (strcmp(enc, "q4_0") == 0 && oo.weights_import == ENGINE_IMPORT_AUTO)
		oo.weights_import = ENGINE_IMPORT_UPLOAD;
	cr_assert_eq(engine_create(x->m, &oo, &x->e), 0, "engine_create: %s", err_msg());
}

static void fx_open(struct fx *x, const char *enc, uint32_t max_batch)
{
	struct engine_opts o = { .max_ctx = 128, .max_batch = max_batch, .n_split = 4 };
	fx_open_opts(x, enc, &o);
}

static void fx_close(struct fx *x)
{
	engine_destroy(x->e);
	model_close(x->m);
	golden_free(&x->g);
}

/* All 48 golden positions in prefill chunks of max_batch, every row's logits. */
static void check_golden(const char *enc)
{
	struct fx x;
	/* f32 weights are held to 1e-4: an f32 KV cache (the default f16 one
	 * moves the golden logits by up to 6.6e-4; engine/golden_kv_types) */
	bool exact = !strcmp(enc, "f32") || !strcmp(enc, "hf");
	struct engine_opts o = { .max_ctx = 128, .max_batch = 16, .n_split = 4,
				 .kv_type = exact ? KV_TYPE_F32 : KV_TYPE_F16 };
	fx_open_opts(&x, enc, &o);
	size_t V = x.g.n_vocab;
	float *lg = malloc(x.g.n_tokens * V * sizeof *lg);
	cr_assert(lg);
	cr_assert_eq(engine_forward(x.e, x.g.tokens, x.g.n_tokens, 0, lg, true), 0, "%s", err_msg());
	struct golden_summary s;
	bool ok = golden_check_all(&x.g, lg, &s);
	cr_assert(ok, "%s: %u positions fail, max rel %.3e at %u (first fail %u)", enc, s.n_fail, s.max_rel,
		  s.worst_pos, s.first_fail);
	free(lg);
	fx_close(&x);
}

Test(engine, golden_f32, .timeout = 120) { check_golden("f32"); }
Test(engine, golden_q8_0, .timeout = 120) { check_golden("q8_0"); }
Test(engine, golden_q4_0, .timeout = 120) { check_golden("q4_0"); }
Test(engine, golden_hf, .timeout = 120) { check_golden("hf"); }

/* 32 greedy tokens after a prompt (past the sliding window of 8), decoded one
 * replayed command buffer per token, equal to the CPU reference's choices. */
Test(engine, greedy_matches_reference, .timeout = 120)
{
	struct fx x;
	fx_open(&x, "f32", 8);
	struct ref_model *r;
	cr_assert_eq(ref_create(x.m, 128, &r), 0, "%s", err_msg());
	size_t V = x.g.n_vocab;
	float *lg = malloc(V * sizeof *lg);
	uint32_t prompt = 5, tok = 0, ref_tok = 0;
	for (uint32_t t = 0; t < prompt; t++)
		cr_assert_eq(ref_forward(r, x.g.tokens[t], t, lg), 0);
	ref_tok = golden_argmax(lg, (uint32_t)V);
	cr_assert_eq(engine_argmax(x.e, x.g.tokens, prompt, 0, &tok), 0, "%s", err_msg());
	cr_assert_eq(tok, ref_tok, "first token %u vs reference %u", tok, ref_tok);
	for (uint32_t i = 0; i < 32; i++) {
		uint32_t pos = prompt + i;
		cr_assert_eq(ref_forward(r, ref_tok, pos, lg), 0);
		uint32_t next_ref = golden_argmax(lg, (uint32_t)V);
		uint32_t next;
		cr_assert_eq(engine_argmax(x.e, &tok, 1, pos, &next), 0, "%s", err_msg());
		cr_assert_eq(next, next_ref, "step %u: engine %u, reference %u", i, next, next_ref);
		tok = next;
		ref_tok = next_ref;
	}
	struct engine_timing tm;
	cr_assert_eq(engine_timing(x.e, &tm), 0, "%s", err_msg());
	cr_assert(tm.total_ns > 0 && tm.attn_ns > 0 && tm.ffn_ns > 0);
	free(lg);
	ref_destroy(r);
	fx_close(&x);
}

/* Prefill split 5+11+16+16 gives the same logits as token-by-token decode:
 * to 1e-3, or where the prefill runs on matrix cores (f16 products against
 * decode's f32: measured 7.1e-3 on the H100) to 2e-2. */
Test(engine, chunked_prefill_equals_decode, .timeout = 120)
{
	struct fx x;
	fx_open(&x, "q8_0", 16);
	size_t V = x.g.n_vocab;
	uint32_t n = 48;
	float *a = malloc(n * V * sizeof *a), *b = malloc(n * V * sizeof *b);
	uint32_t cuts[] = { 0, 5, 16, 32, 48 };
	for (int i = 0; i < 4; i++)
		cr_assert_eq(engine_forward(x.e, x.g.tokens + cuts[i], cuts[i + 1] - cuts[i], cuts[i],
					    a + cuts[i] * V, true), 0, "%s", err_msg());
	cr_assert_eq(engine_reset(x.e), 0);
	for (uint32_t t = 0; t < n; t++)
		cr_assert_eq(engine_forward(x.e, x.g.tokens + t, 1, t, b + t * V, false), 0, "%s", err_msg());
	double worst = 0;
	for (size_t i = 0; i < n * V; i++) {
		double d = fabs((double)a[i] - b[i]);
		if (isinf(a[i]) && isinf(b[i]))
			d = 0;
		if (d > worst)
			worst = d;
	}
	double bound = strstr(engine_kernels(x.e), "matrix cores") ? 2e-2 : 1e-3;
	cr_assert(worst < bound, "chunked vs decode: max abs diff %g (bound %g)", worst, bound);
	free(a);
	free(b);
	fx_close(&x);
}

/* Split placement's two engines each hold what they run (issue 30): the
 * attention worker's no FFN matrices and no embedding, the FFN worker's no
 * Q/K/V/O and no KV pools (fewer device bytes by at least those), and the
 * two together (embed, attention, FFN, head, rows through the host as the
 * workers pass them) give the fused engine's logits and greedy token. */
Test(engine, split_engines_hold_their_share, .timeout = 120)
{
	struct engine_opts o = { .max_ctx = 128, .max_batch = 16, .n_split = 4, .kv_type = KV_TYPE_F32,
				 .weights_import = ENGINE_IMPORT_UPLOAD, .max_seqs = 2 };
	struct fx full, at, ff;
	fx_open_opts(&full, "f32", &o);
	o.attn_only = true;
	fx_open_opts(&at, "f32", &o);
	o.attn_only = false;
	o.ffn_only = true;
	fx_open_opts(&ff, "f32", &o);
	o.attn_only = true;
	struct engine *bad = NULL;
	cr_assert_eq(engine_create(full.m, &o, &bad), ERR_INVAL, "attn_only and ffn_only together");
	const struct model *m = full.m;
	uint64_t qkvo = 0, ffn = m->tok_embd->nbytes;
	for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
		const struct model_layer *ml = &m->layers[l];
		qkvo += ml->wq->nbytes + ml->wk->nbytes + ml->wv->nbytes + ml->wo->nbytes;
		ffn += ml->ffn_gate->nbytes + ml->ffn_up->nbytes + ml->ffn_down->nbytes;
	}
	uint64_t imp, t_full, t_at, t_ff, dl_full, dl_ff, hv;
	engine_weights_import(full.e, &imp, &t_full);
	engine_weights_import(at.e, &imp, &t_at);
	engine_weights_import(ff.e, &imp, &t_ff);
	cr_assert_eq(t_full - t_ff, qkvo, "the FFN engine's matrices: %llu of %llu bytes (Q/K/V/O are %llu)",
		     (unsigned long long)t_ff, (unsigned long long)t_full, (unsigned long long)qkvo);
	cr_assert_eq(t_full - t_at, ffn, "the attention engine's matrices: %llu of %llu bytes",
		     (unsigned long long)t_at, (unsigned long long)t_full);
	engine_placement(full.e, &dl_full, &hv);
	engine_placement(ff.e, &dl_ff, &hv);
	uint64_t kv = engine_kv_layout(full.e)->bytes;
	cr_assert_geq(dl_full - dl_ff, qkvo + kv, "device bytes: fused %llu, FFN %llu (Q/K/V/O %llu + KV %llu less)",
		      (unsigned long long)dl_full, (unsigned long long)dl_ff, (unsigned long long)qkvo,
		      (unsigned long long)kv);

	uint32_t n = 12, E = m->cfg.n_embd;
	size_t V = full.g.n_vocab;
	float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b), *h = malloc((size_t)n * E * sizeof *h);
	cr_assert_eq(engine_forward(full.e, full.g.tokens, n, 0, a, false), 0, "%s", err_msg());
	cr_assert_eq(engine_embed(ff.e, full.g.tokens, n), 0, "%s", err_msg());
	cr_assert_eq(engine_hidden_get(ff.e, h, n), 0, "%s", err_msg());
	for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
		cr_assert_eq(engine_stage_io(at.e, l, 1, ENGINE_STAGE_ATTN, n, 0, h, h), 0, "%s", err_msg());
		cr_assert_eq(engine_stage_io(ff.e, l, 1, ENGINE_STAGE_FFN, n, 0, h, h), 0, "%s", err_msg());
	}
	cr_assert_eq(engine_hidden_set(ff.e, h, n), 0, "%s", err_msg());
	cr_assert_eq(engine_head(ff.e, n, b), 0, "%s", err_msg());
	size_t am = 0, bm = 0;
	for (size_t i = 0; i < V; i++) {
		if (!(isinf(a[i]) && isinf(b[i])))
			cr_assert(fabsf(a[i] - b[i]) < 1e-3f, "logit %zu: fused %g, split %g", i, a[i], b[i]);
		am = a[i] > a[am] ? i : am;
		bm = b[i] > b[bm] ? i : bm;
	}
	cr_assert_eq(am, bm, "greedy token: fused %zu, split %zu", am, bm);
	/* the batched FFN stage (split's decode micro-batches), narrow and wide:
	 * the FFN engine's rows are the fused engine's, bit for bit */
	uint32_t seqs[2] = { 0, 1 }, pos[2] = { n, 3 };
	float *r1 = malloc(2 * (size_t)E * sizeof *r1), *r2 = malloc(2 * (size_t)E * sizeof *r2);
	for (int wide = 0; wide < 2; wide++) {
		cr_assert_eq(engine_stage_batch(full.e, 2, ENGINE_STAGE_FFN, 2, seqs, pos, wide, h, r1), 0, "%s", err_msg());
		cr_assert_eq(engine_stage_batch(ff.e, 2, ENGINE_STAGE_FFN, 2, seqs, pos, wide, h, r2), 0, "%s", err_msg());
		cr_assert_arr_eq(r1, r2, 2 * (size_t)E * sizeof *r1, "stage_batch FFN (wide %d): fused and FFN engines differ", wide);
	}
	free(r1);
	free(r2);
	/* what an engine does not hold it refuses */
	cr_assert_eq(engine_stage_io(ff.e, 0, 1, ENGINE_STAGE_ATTN, 1, 0, h, h), ERR_STATE);
	cr_assert_eq(engine_stage(ff.e, 0, ENGINE_STAGE_ATTN, 1, 0), ERR_STATE);
	cr_assert_eq(engine_forward(ff.e, full.g.tokens, 1, 0, NULL, false), ERR_STATE);
	cr_assert_eq(engine_stage_io(at.e, 0, 1, ENGINE_STAGE_FFN, 1, 0, h, h), ERR_STATE);
	cr_assert_eq(engine_embed(at.e, full.g.tokens, 1), ERR_STATE);
	free(a);
	free(b);
	free(h);
	fx_close(&ff);
	fx_close(&at);
	fx_close(&full);
}

/* embed + per-layer stages + head reproduce the fused forward's last logits. */
Test(engine, stages_equal_fused, .timeout = 120)
{
	struct fx x;
	fx_open(&x, "f32", 16);
	size_t V = x.g.n_vocab;
	uint32_t n = 12;
	float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
	cr_assert_eq(engine_forward(x.e, x.g.tokens, n, 0, a, false), 0, "%s", err_msg());
	cr_assert_eq(engine_reset(x.e), 0);
	cr_assert_eq(engine_embed(x.e, x.g.tokens, n), 0, "%s", err_msg());
	uint32_t E = x.m->cfg.n_embd;
	float *h = malloc((size_t)n * E * sizeof *h);
	for (uint32_t l = 0; l < x.m->cfg.n_layer; l++) {
		cr_assert_eq(engine_stage(x.e, l, ENGINE_STAGE_ATTN, n, 0), 0, "%s", err_msg());
		/* a round trip through the host, as the split placement does */
		cr_assert_eq(engine_hidden_get(x.e, h, n), 0, "%s", err_msg());
		cr_assert_eq(engine_hidden_set(x.e, h, n), 0, "%s", err_msg());
		cr_assert_eq(engine_stage(x.e, l, ENGINE_STAGE_FFN, n, 0), 0, "%s", err_msg());
	}
	cr_assert_eq(engine_head(x.e, n, b), 0, "%s", err_msg());
	for (size_t i = 0; i < V; i++)
		if (!(isinf(a[i]) && isinf(b[i])))
			cr_assert(fabsf(a[i] - b[i]) < 1e-3f, "logit %zu: %g vs %g", i, a[i], b[i]);
	cr_assert_eq(engine_stage(x.e, 99, ENGINE_STAGE_FFN, 1, 0), ERR_INVAL);

	/* engine_stage_io (one submission per call, the split workers' path): the
	 * prompt as one multi-layer call, then one decode token layer by layer
	 * (replayed command buffers) must match the fused forward. */
	float *c = malloc(V * sizeof *c);
	cr_assert_eq(engine_reset(x.e), 0);
	cr_assert_eq(engine_forward(x.e, x.g.tokens, n + 1, 0, a, false), 0, "%s", err_msg());
	cr_assert_eq(engine_reset(x.e), 0);
	cr_assert_eq(engine_embed(x.e, x.g.tokens, n), 0, "%s", err_msg());
	cr_assert_eq(engine_hidden_get(x.e, h, n), 0, "%s", err_msg());
	cr_assert_eq(engine_stage_io(x.e, 0, x.m->cfg.n_layer, ENGINE_STAGE_BOTH, n, 0, h, h), 0, "%s", err_msg());
	cr_assert_eq(engine_embed(x.e, x.g.tokens + n, 1), 0, "%s", err_msg());
	cr_assert_eq(engine_hidden_get(x.e, h, 1), 0, "%s", err_msg());
	for (int rep = 0; rep < 2; rep++) /* the second pass replays the recorded buffers */
		for (uint32_t l = 0; l < x.m->cfg.n_layer; l++) {
			if (rep == 1 && l == 0) {
				cr_assert_eq(engine_embed(x.e, x.g.tokens + n, 1), 0, "%s", err_msg());
				cr_assert_eq(engine_hidden_get(x.e, h, 1), 0, "%s", err_msg());
			}
			cr_assert_eq(engine_stage_io(x.e, l, 1, ENGINE_STAGE_ATTN, 1, n, h, h), 0, "%s", err_msg());
			cr_assert_eq(engine_stage_io(x.e, l, 1, ENGINE_STAGE_FFN, 1, n, h, h), 0, "%s", err_msg());
		}
	cr_assert_eq(engine_hidden_set(x.e, h, 1), 0, "%s", err_msg());
	cr_assert_eq(engine_head(x.e, 1, c), 0, "%s", err_msg());
	for (size_t i = 0; i < V; i++)
		if (!(isinf(a[i]) && isinf(c[i])))
			cr_assert(fabsf(a[i] - c[i]) < 1e-3f, "stage_io logit %zu: %g vs %g", i, a[i], c[i]);
	cr_assert_eq(engine_stage_io(x.e, 5, 2, ENGINE_STAGE_FFN, 1, 0, h, h), ERR_INVAL);
	/* both kinds of submission add their GPU time (timestamp queries) */
	if (engine_vk(x.e)->timestamps) {
		uint64_t g0 = engine_gpu_ns(x.e);
		cr_assert_eq(engine_stage_io(x.e, 0, 1, ENGINE_STAGE_ATTN, 1, n, h, h), 0, "%s", err_msg());
		uint64_t g1 = engine_gpu_ns(x.e);
		cr_assert_gt(g1, g0, "stage_io added no GPU time");
		cr_assert_eq(engine_forward(x.e, x.g.tokens + n, 1, n, NULL, false), 0, "%s", err_msg());
		cr_assert_gt(engine_gpu_ns(x.e), g1, "forward added no GPU time");
	}
	free(c);
	free(h);
	free(a);
	free(b);
	fx_close(&x);
}

/* Top-k on the GPU equals a CPU sort of the same logits; bad input is refused. */
Test(engine, topk_and_errors, .timeout = 120)
{
	struct fx x;
	fx_open(&x, "q4_0", 8);
	size_t V = x.g.n_vocab;
	float *lg = malloc(V * sizeof *lg);
	uint32_t ids[64];
	float vals[64];
	cr_assert_eq(engine_topk(x.e, x.g.tokens, 10, 0, 40, ids, vals), 0, "%s", err_msg());
	cr_assert_eq(engine_reset(x.e), 0);
	cr_assert_eq(engine_forward(x.e, x.g.tokens, 10, 0, lg, false), 0, "%s", err_msg());
	for (uint32_t i = 0; i < 40; i++) {
		uint32_t best = golden_argmax(lg, (uint32_t)V);
		cr_assert_eq(ids[i], best, "rank %u: %u vs %u", i, ids[i], best);
		cr_assert_eq(vals[i], lg[best]);
		lg[best] = -INFINITY;
	}
	uint32_t bad = 1u << 30;
	cr_assert_eq(engine_forward(x.e, &bad, 1, 0, NULL, false), ERR_INVAL);
	uint32_t ok = 1;
	cr_assert_eq(engine_forward(x.e, &ok, 1, 128, NULL, false), ERR_RANGE);
	cr_assert_eq(engine_topk(x.e, &ok, 1, 0, 65, ids, vals), ERR_INVAL);
	free(lg);
	fx_close(&x);
}

/* Two sequences interleaved token by token in one engine (separate KV slots)
 * give exactly the logits each gives alone; a bad slot is refused. */
Test(engine, sequences_are_independent, .timeout = 120)
{
	struct fx x;
	struct engine_opts o = { .max_ctx = 64, .max_batch = 8, .n_split = 4, .max_seqs = 2 };
	fx_open_opts(&x, "q4_0", &o);
	size_t V = x.g.n_vocab;
	enum { N = 12 };
	const uint32_t *ta = x.g.tokens, *tb = x.g.tokens + 20; /* different prompts, both past the window */
	float *alone = malloc(2 * N * V * sizeof *alone), *mixed = malloc(2 * N * V * sizeof *mixed);
	cr_assert(alone && mixed);
	for (uint32_t s = 0; s < 2; s++) {
		cr_assert_eq(engine_reset(x.e), 0);
		cr_assert_eq(engine_seq_select(x.e, 0), 0);
		for (uint32_t t = 0; t < N; t++)
			cr_assert_eq(engine_forward(x.e, (s ? tb : ta) + t, 1, t, alone + (s * N + t) * V, false), 0,
				     "%s", err_msg());
	}
	cr_assert_eq(engine_reset(x.e), 0);
	for (uint32_t t = 0; t < N; t++)
		for (uint32_t s = 0; s < 2; s++) {
			cr_assert_eq(engine_seq_select(x.e, s), 0);
			cr_assert_eq(engine_forward(x.e, (s ? tb : ta) + t, 1, t, mixed + (s * N + t) * V, false), 0,
				     "%s", err_msg());
		}
	cr_assert_eq(memcmp(alone, mixed, 2 * N * V * sizeof *alone), 0, "interleaved sequences differ");
	cr_assert_eq(engine_seq_select(x.e, 2), ERR_RANGE);
	cr_assert_eq(engine_seq_reset(x.e, 1), 0);
	free(alone);
	free(mixed);
	fx_close(&x);
}

/* ---- continuous batching (engine_forward_batch) ---- */

static void fx_open_seqs(struct fx *x, const char *enc, uint32_t max_seqs)
{
	struct engine_opts o = { .max_ctx = 64, .max_batch = 8, .n_split = 4, .max_seqs = max_seqs };
	fx_open_opts(x, enc, &o);
}

/* A batch of 3 sequences at different positions (one past the sliding window
 * of 8, one at position 0) gives bitwise the logits, top-k and argmax each
 * token gives when run alone: every row runs the code a lone token runs. */
static void check_batch_equals_alone(const char *enc)
{
	struct fx x;
	fx_open_seqs(&x, enc, 4);
	size_t V = x.g.n_vocab;
	const uint32_t *tok = x.g.tokens;
	/* prefill: seq 0 holds tok[0..10), seq 1 tok[20..27), seq 2 nothing */
	cr_assert_eq(engine_seq_select(x.e, 0), 0);
	cr_assert_eq(engine_forward(x.e, tok, 10, 0, NULL, false), 0, "%s", err_msg());
	cr_assert_eq(engine_seq_select(x.e, 1), 0);
	cr_assert_eq(engine_forward(x.e, tok + 20, 7, 0, NULL, false), 0, "%s", err_msg());
	const uint32_t bt[3] = { tok[10], tok[27], tok[40] }, bs[3] = { 0, 1, 2 }, bp[3] = { 10, 7, 0 };
	float *alone = malloc(3 * V * sizeof *alone), *batch = malloc(3 * V * sizeof *batch);
	cr_assert(alone && batch);
	uint32_t a_ids[3][64], a_am[3];
	float a_vals[3][64];
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert_eq(engine_seq_select(x.e, bs[i]), 0);
		cr_assert_eq(engine_forward(x.e, &bt[i], 1, bp[i], alone + i * V, false), 0, "%s", err_msg());
		cr_assert_eq(engine_topk(x.e, &bt[i], 1, bp[i], 64, a_ids[i], a_vals[i]), 0, "%s", err_msg());
		cr_assert_eq(engine_argmax(x.e, &bt[i], 1, bp[i], &a_am[i]), 0, "%s", err_msg());
	}
	cr_assert_eq(engine_seq_select(x.e, 3), 0);
	/* the batch rewrites the same KV rows (same values) and reads the same history */
	cr_assert_eq(engine_forward_batch(x.e, 3, bt, bs, bp, ENGINE_BATCH_LOGITS, 0, NULL, batch), 0, "%s", err_msg());
	for (uint32_t i = 0; i < 3; i++)
		cr_assert_eq(memcmp(alone + i * V, batch + i * V, V * sizeof *batch), 0, "%s: row %u logits differ", enc, i);
	uint32_t b_ids[3 * 64], b_am[3];
	float b_vals[3 * 64], b_amv[3];
	cr_assert_eq(engine_forward_batch(x.e, 3, bt, bs, bp, ENGINE_BATCH_TOPK, 64, b_ids, b_vals), 0, "%s", err_msg());
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert_eq(memcmp(a_ids[i], b_ids + i * 64, sizeof a_ids[i]), 0, "%s: row %u top-k ids differ", enc, i);
		cr_assert_eq(memcmp(a_vals[i], b_vals + i * 64, sizeof a_vals[i]), 0, "%s: row %u top-k logits differ", enc, i);
	}
	cr_assert_eq(engine_forward_batch(x.e, 3, bt, bs, bp, ENGINE_BATCH_ARGMAX, 1, b_am, b_amv), 0, "%s", err_msg());
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert_eq(b_am[i], a_am[i], "%s: row %u argmax %u vs %u", enc, i, b_am[i], a_am[i]);
		cr_assert_eq(b_am[i], a_ids[i][0]);
		cr_assert_eq(memcmp(&b_amv[i], &a_vals[i][0], 4), 0, "%s: row %u argmax value", enc, i);
	}
	/* the selected sequence is untouched */
	uint32_t t3;
	cr_assert_eq(engine_argmax(x.e, &tok[5], 1, 0, &t3), 0, "%s", err_msg());
	free(alone);
	free(batch);
	fx_close(&x);
}

Test(engine, batch_equals_alone_q4_0, .timeout = 120) { check_batch_equals_alone("q4_0"); }
Test(engine, batch_equals_alone_f32, .timeout = 120) { check_batch_equals_alone("f32"); }

/* 3 sequences decoded greedily for 8 steps with one batch per step equal the
 * same sequences decoded one at a time (other KV slots of the same engine). */
Test(engine, batched_greedy_equals_sequential, .timeout = 120)
{
	struct fx x;
	fx_open_seqs(&x, "q8_0", 6);
	const uint32_t *tok = x.g.tokens;
	const uint32_t plen[3] = { 9, 3, 14 }, poff[3] = { 0, 12, 30 };
	uint32_t cur_b[3], cur_s[3], pos[3];
	for (uint32_t i = 0; i < 3; i++) {
		for (uint32_t half = 0; half < 2; half++) {
			cr_assert_eq(engine_seq_select(x.e, i + 3 * half), 0);
			cr_assert_eq(engine_argmax(x.e, tok + poff[i], plen[i], 0, half ? &cur_s[i] : &cur_b[i]), 0, "%s",
				     err_msg());
		}
		cr_assert_eq(cur_b[i], cur_s[i]);
		pos[i] = plen[i];
	}
	const uint32_t seqs[3] = { 0, 1, 2 };
	for (uint32_t step = 0; step < 8; step++) {
		uint32_t next_b[3];
		cr_assert_eq(engine_forward_batch(x.e, 3, cur_b, seqs, pos, ENGINE_BATCH_ARGMAX, 1, next_b, NULL), 0, "%s",
			     err_msg());
		for (uint32_t i = 0; i < 3; i++) {
			uint32_t next_s;
			cr_assert_eq(engine_seq_select(x.e, i + 3), 0);
			cr_assert_eq(engine_argmax(x.e, &cur_s[i], 1, pos[i], &next_s), 0, "%s", err_msg());
			cr_assert_eq(next_b[i], next_s, "step %u seq %u: batched %u, alone %u", step, i, next_b[i], next_s);
			cur_b[i] = next_b[i];
			cur_s[i] = next_s;
			pos[i]++;
		}
	}
	fx_close(&x);
}

Test(engine, batch_rejects_bad_input, .timeout = 60)
{
	struct fx x;
	fx_open_seqs(&x, "q4_0", 4);
	cr_assert_eq(engine_batch_max(x.e), 4);
	uint32_t t[5] = { 1, 2, 3, 4, 5 }, s[5] = { 0, 1, 2, 3, 0 }, p[5] = { 0, 0, 0, 0, 0 }, ids[5 * 64];
	float v[5 * 64];
	const uint32_t dup[2] = { 1, 1 }, far[2] = { 0, 64 }, bad_seq[2] = { 0, 4 }, bad_tok[2] = { 1, x.g.n_vocab };
	cr_assert_eq(engine_forward_batch(x.e, 2, t, dup, p, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_INVAL);
	cr_assert_eq(engine_forward_batch(x.e, 5, t, s, p, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_INVAL); /* n > max */
	cr_assert_eq(engine_forward_batch(x.e, 0, t, s, p, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_INVAL);
	cr_assert_eq(engine_forward_batch(x.e, 2, t, s, far, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_RANGE);
	cr_assert_eq(engine_forward_batch(x.e, 2, t, bad_seq, p, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_RANGE);
	cr_assert_eq(engine_forward_batch(x.e, 2, bad_tok, s, p, ENGINE_BATCH_ARGMAX, 1, ids, NULL), ERR_INVAL);
	cr_assert_eq(engine_forward_batch(x.e, 2, t, s, p, ENGINE_BATCH_TOPK, 65, ids, v), ERR_INVAL);
	cr_assert_eq(engine_forward_batch(x.e, 2, t, s, p, ENGINE_BATCH_TOPK, 0, ids, v), ERR_INVAL);
	cr_assert_eq(engine_forward_batch(x.e, 2, t, s, p, (enum engine_batch_mode)9, 1, ids, v), ERR_INVAL);
	cr_assert_eq(engine_forward_batch(x.e, 2, t, s, p, ENGINE_BATCH_TOPK, 8, ids, NULL), ERR_INVAL);
	/* a good batch of the maximum size still runs */
	cr_assert_eq(engine_forward_batch(x.e, 4, t, s, p, ENGINE_BATCH_TOPK, 8, ids, v), 0, "%s", err_msg());
	fx_close(&x);
}

/* Two engines of one model under different knobs (x[0], x[1]) give the same
 * logits for a prompt and 30 single-token steps (bitwise with tol 0, else
 * within a relative L2 distance of tol), and a decode step of each records
 * want[] dispatches (name[]: the knobs, for messages). Closes both. */
static void check_same_decode(struct fx x[2], const uint32_t want[2], const char *const name[2], double tol)
{
	size_t V = x[0].g.n_vocab;
	const uint32_t *tok = x[0].g.tokens, prompt = 6;
	float *lg = malloc(2 * V * sizeof *lg);
	cr_assert(lg);
	for (uint32_t i = 0; i <= 30; i++) {
		for (int f = 0; f < 2; f++)
			cr_assert_eq(i == 0 ? engine_forward(x[f].e, tok, prompt, 0, lg + f * V, false)
					    : engine_forward(x[f].e, tok + prompt + i - 1, 1, prompt + i - 1, lg + f * V, false),
				     0, "%s", err_msg());
		if (tol == 0) {
			cr_assert_eq(memcmp(lg, lg + V, V * sizeof *lg), 0, "step %u: %s logits differ from %s", i, name[0],
				     name[1]);
			continue;
		}
		double d2 = 0, n2 = 0;
		for (size_t v = 0; v < V; v++) {
			double d = (double)lg[v] - lg[V + v];
			d2 += d * d;
			n2 += (double)lg[V + v] * lg[V + v];
		}
		cr_assert_leq(sqrt(d2 / n2), tol, "step %u: %s logits %.3e away from %s", i, name[0], sqrt(d2 / n2), name[1]);
	}
	for (int f = 0; f < 2; f++) {
		struct engine_prof pr;
		int rc = engine_profile(x[f].e, tok, 1, 3, &pr);
		if (rc == ERR_UNSUP)
			continue; /* no timestamps */
		cr_assert_eq(rc, 0, "%s", err_msg());
		cr_assert_eq(pr.n_dispatch, want[f], "%s: %u dispatches", name[f], pr.n_dispatch);
	}
	free(lg);
	fx_close(&x[0]);
	fx_close(&x[1]);
}

/* The norm tail (UNICORN_VK_NORM_TAIL=N: decode's wo and down run the
 * post-norm that follows them in their last workgroup; off by default)
 * changes the recorded dispatches, not the numbers: a prompt and 30
 * single-token steps give bitwise the logits of the same engine recording
 * the norm as its own dispatch (UNICORN_VK_NORM_TAIL=dispatch), and a decode
 * step records 5 dispatches per layer instead of 7. */
Test(engine, norm_tail_equals_dispatch, .timeout = 120)
{
	struct fx x[2];
	for (int f = 0; f < 2; f++) {
		cr_assert_eq(setenv("UNICORN_VK_NORM_TAIL", f ? "dispatch" : "1536", 1), 0);
		fx_open(&x[f], "q4_0", 8);
	}
	unsetenv("UNICORN_VK_NORM_TAIL");
	cr_assert(engine_norm_tail(x[0].e), "the golden model's rows (%u) take the tail", x[0].m->cfg.n_embd);
	uint32_t L = x[0].m->cfg.n_layer, want[2] = { 5 * L + 4, 7 * L + 4 };
	const char *const name[2] = { "the norm tail's", "the dispatched norm's" };
	check_same_decode(x, want, name, 0);
}

/* Split placement's batched stages: a batch of 3 sequences' tokens, layer by
 * layer (engine_stage_batch), gives bit for bit the hidden rows of each token
 * run alone through the single-token stages (engine_stage_io), and the
 * batched head gives the lone tokens' top-k. */
Test(engine, stage_batch_equals_lone_stages, .timeout = 120)
{
	struct fx x;
	fx_open_seqs(&x, "q4_0", 4);
	const uint32_t *tok = x.g.tokens;
	uint32_t L = x.m->cfg.n_layer, E = x.m->cfg.n_embd;
	cr_assert_eq(engine_seq_select(x.e, 0), 0);
	cr_assert_eq(engine_forward(x.e, tok, 10, 0, NULL, false), 0, "%s", err_msg());
	cr_assert_eq(engine_seq_select(x.e, 1), 0);
	cr_assert_eq(engine_forward(x.e, tok + 20, 7, 0, NULL, false), 0, "%s", err_msg());
	const uint32_t bt[3] = { tok[10], tok[27], tok[40] }, bs[3] = { 0, 1, 2 }, bp[3] = { 10, 7, 0 };
	float *lone = malloc(3 * (size_t)E * sizeof *lone), *rows = malloc(3 * (size_t)E * sizeof *rows);
	cr_assert(lone && rows);
	uint32_t a_ids[3][64];
	float a_vals[3][64];
	for (uint32_t i = 0; i < 3; i++) {
		float *h = lone + (size_t)i * E;
		cr_assert_eq(engine_seq_select(x.e, bs[i]), 0);
		cr_assert_eq(engine_embed(x.e, &bt[i], 1), 0, "%s", err_msg());
		cr_assert_eq(engine_hidden_get(x.e, h, 1), 0, "%s", err_msg());
		for (uint32_t l = 0; l < L; l++) {
			cr_assert_eq(engine_stage_io(x.e, l, 1, ENGINE_STAGE_ATTN, 1, bp[i], h, h), 0, "%s", err_msg());
			cr_assert_eq(engine_stage_io(x.e, l, 1, ENGINE_STAGE_FFN, 1, bp[i], h, h), 0, "%s", err_msg());
		}
		cr_assert_eq(engine_topk(x.e, &bt[i], 1, bp[i], 64, a_ids[i], a_vals[i]), 0, "%s", err_msg());
	}
	cr_assert_eq(engine_embed(x.e, bt, 3), 0, "%s", err_msg());
	cr_assert_eq(engine_hidden_get(x.e, rows, 3), 0, "%s", err_msg());
	for (uint32_t l = 0; l < L; l++) {
		cr_assert_eq(engine_stage_batch(x.e, l, ENGINE_STAGE_ATTN, 3, bs, bp, false, rows, rows), 0, "%s", err_msg());
		cr_assert_eq(engine_stage_batch(x.e, l, ENGINE_STAGE_FFN, 3, bs, bp, false, rows, rows), 0, "%s", err_msg());
	}
	for (uint32_t i = 0; i < 3; i++)
		cr_assert_eq(memcmp(lone + (size_t)i * E, rows + (size_t)i * E, E * sizeof *rows), 0,
			     "row %u: batched stages differ from the lone token's", i);
	uint32_t b_ids[3 * 64], b_am[3];
	float b_vals[3 * 64];
	cr_assert_eq(engine_head_batch(x.e, 3, rows, false, ENGINE_BATCH_TOPK, 64, b_ids, b_vals), 0, "%s", err_msg());
	cr_assert_eq(engine_head_batch(x.e, 3, rows, false, ENGINE_BATCH_ARGMAX, 1, b_am, NULL), 0, "%s", err_msg());
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert_eq(memcmp(a_ids[i], b_ids + i * 64, sizeof a_ids[i]), 0, "row %u: top-k ids differ", i);
		cr_assert_eq(memcmp(a_vals[i], b_vals + i * 64, sizeof a_vals[i]), 0, "row %u: top-k logits differ", i);
		cr_assert_eq(b_am[i], a_ids[i][0], "row %u: argmax", i);
	}
	/* bad input is refused, never run */
	const uint32_t dup[2] = { 1, 1 };
	cr_assert_eq(engine_stage_batch(x.e, 0, ENGINE_STAGE_ATTN, 2, dup, bp, false, rows, rows), ERR_INVAL);
	cr_assert_eq(engine_stage_batch(x.e, L, ENGINE_STAGE_FFN, 1, bs, bp, false, rows, rows), ERR_INVAL);
	cr_assert_eq(engine_stage_batch(x.e, 0, ENGINE_STAGE_BOTH, 1, bs, bp, false, rows, rows), ERR_INVAL);
	cr_assert_eq(engine_head_batch(x.e, 0, rows, false, ENGINE_BATCH_ARGMAX, 1, b_am, NULL), ERR_INVAL);
	free(lone);
	free(rows);
	fx_close(&x);
}

/* Run prompt chunks ch[0..n) through every layer's stages with
 * engine_stage_chunks, rows gathered from and scattered to h (each chunk's
 * rows at h + row0[i] * n_embd). */
static void stage_chunks_all(struct fx *x, const struct engine_chunk *ch, uint32_t n, float *h, const uint32_t *row0)
{
	uint32_t E = x->m->cfg.n_embd, total = 0;
	for (uint32_t i = 0; i < n; i++)
		total += ch[i].n;
	float *rows = malloc((size_t)total * E * sizeof *rows);
	cr_assert(rows);
	for (uint32_t i = 0, r = 0; i < n; r += ch[i].n, i++)
		memcpy(rows + (size_t)r * E, h + (size_t)row0[i] * E, (size_t)ch[i].n * E * sizeof *rows);
	for (uint32_t l = 0; l < x->m->cfg.n_layer; l++) {
		cr_assert_eq(engine_stage_chunks(x->e, l, ENGINE_STAGE_ATTN, n, ch, rows, rows), 0, "%s", err_msg());
		cr_assert_eq(engine_stage_chunks(x->e, l, ENGINE_STAGE_FFN, n, ch, rows, rows), 0, "%s", err_msg());
	}
	for (uint32_t i = 0, r = 0; i < n; r += ch[i].n, i++)
		memcpy(h + (size_t)row0[i] * E, rows + (size_t)r * E, (size_t)ch[i].n * E * sizeof *rows);
	free(rows);
}

/* Split prefill of several prompts in one submission per stage
 * (engine_stage_chunks): each prompt's rows are bitwise those of its chunk
 * run alone and of the same prompt cut into two chunks, and its last row's
 * logits are within the golden tolerance of the fused forward's. */
Test(engine, stage_chunks_equal_alone, .timeout = 120)
{
	struct fx x;
	struct engine_opts o = { .max_ctx = 64, .max_batch = 32, .n_split = 4, .max_seqs = 4 };
	fx_open_opts(&x, "q4_0", &o);
	const uint32_t *tok = x.g.tokens;
	uint32_t E = x.m->cfg.n_embd;
	size_t V = x.g.n_vocab;
	enum { A = 7, B = 12, C = 5, N = A + B + C };
	const uint32_t row0[3] = { 0, A, A + B };
	float *h = malloc((size_t)N * E * sizeof *h), *alone = malloc((size_t)N * E * sizeof *alone);
	cr_assert(h && alone);
	cr_assert_eq(engine_embed(x.e, tok, N), 0, "%s", err_msg());
	cr_assert_eq(engine_hidden_get(x.e, h, N), 0, "%s", err_msg());
	memcpy(alone, h, (size_t)N * E * sizeof *h);
	/* three prompts of three sequences together */
	const struct engine_chunk all[3] = { { 0, 0, A, tok, false }, { 1, 0, B, tok + A, false },
					     { 2, 0, C, tok + A + B, false } };
	stage_chunks_all(&x, all, 3, h, row0);
	/* each alone, in fresh sequences; the second cut into 5 + 7 */
	const struct engine_chunk one[4] = { { 3, 0, A, tok, false }, { 1, 0, 5, tok + A, false },
					     { 1, 5, B - 5, tok + A + 5, false }, { 2, 0, C, tok + A + B, false } };
	const uint32_t one_row0[4] = { 0, A, A + 5, A + B };
	cr_assert_eq(engine_seq_reset(x.e, 1), 0);
	cr_assert_eq(engine_seq_reset(x.e, 2), 0);
	for (uint32_t i = 0; i < 4; i++)
		stage_chunks_all(&x, &one[i], 1, alone, &one_row0[i]);
	for (uint32_t r = 0; r < N; r++)
		cr_assert_eq(memcmp(h + (size_t)r * E, alone + (size_t)r * E, E * sizeof *h), 0,
			     "row %u: chunks together differ from alone", r);
	/* the second prompt's last row against the fused forward of it */
	float *lg = malloc(V * sizeof *lg), *want = malloc(V * sizeof *want);
	cr_assert(lg && want);
	cr_assert_eq(engine_hidden_set(x.e, h + (size_t)(A + B - 1) * E, 1), 0, "%s", err_msg());
	cr_assert_eq(engine_head(x.e, 1, lg), 0, "%s", err_msg());
	cr_assert_eq(engine_seq_reset(x.e, 3), 0);
	cr_assert_eq(engine_seq_select(x.e, 3), 0);
	cr_assert_eq(engine_forward(x.e, tok + A, B, 0, want, false), 0, "%s", err_msg());
	double d = 0, nn = 0;
	for (size_t j = 0; j < V; j++)
		if (isfinite(want[j])) {
			d += ((double)lg[j] - want[j]) * ((double)lg[j] - want[j]);
			nn += (double)want[j] * want[j];
		}
	cr_assert_leq(sqrt(d / nn), 5e-3, "split chunks vs fused: rel %g", sqrt(d / nn));
	/* bad input is refused, never run */
	const struct engine_chunk dup[2] = { { 0, A, 2, tok, false }, { 0, A + 2, 2, tok, false } },
				  head[1] = { { 0, A, 2, tok, true } };
	cr_assert_eq(engine_stage_chunks(x.e, 0, ENGINE_STAGE_ATTN, 2, dup, h, h), ERR_INVAL);
	cr_assert_eq(engine_stage_chunks(x.e, 0, ENGINE_STAGE_ATTN, 1, head, h, h), ERR_INVAL);
	cr_assert_eq(engine_stage_chunks(x.e, 0, ENGINE_STAGE_BOTH, 1, all, h, h), ERR_INVAL);
	free(lg);
	free(want);
	free(h);
	free(alone);
	fx_close(&x);
}

/* The prefill mat-mat kernel: on matrix cores where the device offers
 * VK_KHR_cooperative_matrix (16x16x16 f16), the tiled mul_mm elsewhere (e.g.
 * lavapipe) and with UNICORN_NO_COOPMAT=1; engine_kernels says which. */
static void check_kernels(bool want_cm)
{
	struct fx x;
	fx_open(&x, "q4_0", 16);
	const char *k = engine_kernels(x.e);
	if (want_cm)
		cr_assert(strstr(k, "mul_mm_cm (prefill, matrix cores: KHR_coopmat 16x16x16 f16)"), "%s", k);
	else
		cr_assert(strstr(k, "+ mul_mm (prefill)") && !strstr(k, "coopmat"), "%s", k);
	fx_close(&x);
}

Test(engine, prefill_kernel_follows_matrix_cores, .timeout = 120)
{
	struct vk_ctx *vk;
	cr_assert_eq(vk_create(NULL, &vk), 0, "%s", err_msg());
	bool cm = vk->coopmat;
	cr_assert_eq(cm, vk->info.coopmat);
	vk_destroy(vk);
	check_kernels(cm);
	setenv("UNICORN_NO_COOPMAT", "1", 1);
	check_kernels(false);
	unsetenv("UNICORN_NO_COOPMAT");
}

/* The decode fusions (rope_kv inside attn when a step's rows are distinct
 * sequences, no attn_combine dispatch in short steps) change the recorded
 * dispatches, not the numbers: a prompt and 30 single-token steps, crossing
 * from short steps to long ones (attention chunk 16), give bitwise the logits
 * UNICORN_NO_FUSE=1 gives, and a short decode step records 7 dispatches per
 * layer instead of 9. */
Test(engine, fused_equals_unfused, .timeout = 120)
{
	struct fx x[2];
	cr_assert_eq(setenv("UNICORN_VK_ATTN_CHUNK", "16", 1), 0);
	for (int f = 0; f < 2; f++) {
		/* whatever the caller's environment says: fused, then not */
		cr_assert_eq(f ? setenv("UNICORN_NO_FUSE", "1", 1) : unsetenv("UNICORN_NO_FUSE"), 0);
		fx_open(&x[f], "q4_0", 8);
	}
	unsetenv("UNICORN_NO_FUSE");
	unsetenv("UNICORN_VK_ATTN_CHUNK");
	/* the norm tail (when the environment turns it on) takes 2 dispatches per layer off both */
	uint32_t L = x[0].m->cfg.n_layer, nt = engine_norm_tail(x[0].e) ? 2 * L : 0;
	uint32_t want[2] = { 7 * L + 4 - nt, 9 * L + 4 - nt };
	const char *const name[2] = { "fused", "unfused" };
	check_same_decode(x, want, name, 0);
}

/* The splits merged by attention's last workgroup (UNICORN_VK_ATTN_COMBINE=
 * fused: no attn_combine dispatch) give attn_combine's numbers within
 * rounding (the two weigh the splits in different orders): a prompt and 30
 * single-token steps past one key split (attention chunk 16), f16 and q8_0
 * KV, on the subgroup and the shared-memory tree kernels. */
Test(engine, fused_merge_equals_combine, .timeout = 180)
{
	static const struct {
		uint32_t kv;
		const char *norm;
	} cases[] = { { KV_TYPE_F16, NULL }, { KV_TYPE_Q8_0, "tree" } };
	cr_assert_eq(setenv("UNICORN_VK_ATTN_CHUNK", "16", 1), 0);
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		struct fx x[2];
		cr_assert_eq(cases[c].norm ? setenv("UNICORN_VK_NORM", cases[c].norm, 1) : unsetenv("UNICORN_VK_NORM"), 0);
		for (int f = 0; f < 2; f++) {
			cr_assert_eq(f ? unsetenv("UNICORN_VK_ATTN_COMBINE") : setenv("UNICORN_VK_ATTN_COMBINE", "fused", 1), 0);
			struct engine_opts o = { .max_ctx = 128, .max_batch = 8, .n_split = 4, .kv_type = cases[c].kv };
			fx_open_opts(&x[f], "q4_0", &o);
		}
		/* a short step records the same dispatches (fused_equals_unfused's) */
		uint32_t L = x[0].m->cfg.n_layer, nt = engine_norm_tail(x[0].e) ? 2 * L : 0;
		const uint32_t want[2] = { 7 * L + 4 - nt, 7 * L + 4 - nt };
		const char *const name[2] = { "the fused merge", "attn_combine" };
		check_same_decode(x, want, name, 1e-5);
	}
	unsetenv("UNICORN_VK_ATTN_CHUNK");
	unsetenv("UNICORN_VK_ATTN_COMBINE");
	unsetenv("UNICORN_VK_NORM");
}

/* A global layer's keys in more splits than a sliding layer's (by default
 * enough for 256 workgroups a token: the tiny model's 4 heads take 64) give
 * the numbers of 16 splits within rounding: a prompt and 30 single-token
 * steps, every split at least one key (UNICORN_VK_ATTN_MIN_CHUNK=1), so the
 * global layer's 7..36 keys run in up to 36 splits against up to 16. */
Test(engine, global_splits_equal_sixteen, .timeout = 120)
{
	struct fx x[2];
	cr_assert_eq(setenv("UNICORN_VK_ATTN_CHUNK", "4", 1), 0);
	cr_assert_eq(setenv("UNICORN_VK_ATTN_MIN_CHUNK", "1", 1), 0);
	unsetenv("UNICORN_VK_ATTN_SPLITS");
	unsetenv("UNICORN_VK_ATTN_SPLITS_GLOBAL");
	for (int f = 0; f < 2; f++) {
		struct engine_opts o = { .max_ctx = 128, .max_batch = 8, .n_split = f ? 16 : 0 };
		fx_open_opts(&x[f], "q4_0", &o);
	}
	unsetenv("UNICORN_VK_ATTN_CHUNK");
	unsetenv("UNICORN_VK_ATTN_MIN_CHUNK");
	uint32_t L = x[0].m->cfg.n_layer, nt = engine_norm_tail(x[0].e) ? 2 * L : 0;
	const uint32_t want[2] = { 7 * L + 4 - nt, 7 * L + 4 - nt }; /* a short step, as fused_equals_unfused's */
	const char *const name[2] = { "64 global splits", "16" };
	check_same_decode(x, want, name, 1e-4); /* f16 partial sums merged in other groups: ~1e-5 */
}
