/* The CPU reference forward pass against the float64 goldens of ../shared/golden. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "formats/model.h"
#include "ref/ref.h"
#include "tests/golden.h"

struct run {
	struct golden g;
	struct model *m;
	struct ref_model *r;
	float *logits; /* [n_tokens][n_vocab] */
};

static void run_open(struct run *x, const char *enc)
{
	memset(x, 0, sizeof *x);
	cr_assert_eq(golden_load(enc, &x->g), 0, "golden_load(%s): %s", enc, err_msg());
	cr_assert_eq(model_open(x->g.model_path, &x->m), 0, "model_open(%s): %s", x->g.model_path, err_msg());
	cr_assert_eq(x->m->cfg.n_vocab, x->g.n_vocab, "vocab of %s", x->g.model_path);
	cr_assert_eq(ref_create(x->m, 0, &x->r), 0, "ref_create: %s", err_msg());
	x->logits = malloc((size_t)x->g.n_tokens * x->g.n_vocab * sizeof(float));
	cr_assert_not_null(x->logits);
}

static void run_forward(struct run *x)
{
	x->r->n_past = 0;
	cr_assert_eq(ref_forward_tokens(x->r, x->g.tokens, x->g.n_tokens, x->logits), 0,
		     "ref_forward_tokens: %s", err_msg());
}

static void run_close(struct run *x)
{
	free(x->logits);
	ref_destroy(x->r);
	model_close(x->m);
	golden_free(&x->g);
}

/* Full golden check of one encoding: every position's tolerance and argmax,
 * and the greedy ids of gemma3-tiny.json. */
static void check_encoding(const char *enc)
{
	struct run x;
	run_open(&x, enc);
	run_forward(&x);
	struct golden_summary s;
	bool ok = golden_check_all(&x.g, x.logits, &s);
	/* The measured error goes to stderr so it can be reported. */
	fprintf(stderr, "reference %-5s max rel L2 %.3e at position %u (tol %.0e), argmax checked at %u/%u\n",
		enc, s.max_rel, s.worst_pos, x.g.rel_tol, s.n_argmax_checked, x.g.n_tokens);
	if (!ok) {
		struct golden_row r;
		golden_check_row(&x.g, s.first_fail, x.logits + (size_t)s.first_fail * x.g.n_vocab, &r);
		cr_assert(ok, "%s: %u positions fail; first %u: rel %.3e argmax ours %u ref %u (lead %.4f)",
			  enc, s.n_fail, s.first_fail, r.rel, r.argmax_ours, r.argmax_ref, r.ref_lead);
	}
	cr_assert_leq(s.max_rel, x.g.rel_tol);
	if (x.g.tie_margin == 0)
		cr_assert_eq(s.n_argmax_checked, x.g.n_tokens);

	for (uint32_t t = 0; t < x.g.n_tokens; t++) {
		struct golden_row r;
		const float *row = x.logits + (size_t)t * x.g.n_vocab;
		golden_check_row(&x.g, t, row, &r);
		if (r.argmax_checked)
			cr_assert_eq(golden_argmax(row, x.g.n_vocab), x.g.greedy_next[t],
				     "%s: greedy id at position %u: ours %u, json %u", enc, t,
				     golden_argmax(row, x.g.n_vocab), x.g.greedy_next[t]);
	}
	run_close(&x);
}

Test(reference, golden_f32, .timeout = 60) { check_encoding("f32"); }
Test(reference, golden_q8_0, .timeout = 60) { check_encoding("q8_0"); }
Test(reference, golden_q4_0, .timeout = 60) { check_encoding("q4_0"); }
Test(reference, golden_hf, .timeout = 60) { check_encoding("hf"); }

/* The golden checks must be able to fail: swapping the local and global rope
 * bases (or dropping the sliding window) is a plausible bug, and must land far
 * outside the f32 tolerance. */
Test(reference, perturbations_are_caught, .timeout = 60)
{
	struct run x;
	run_open(&x, "f32");
	struct golden_summary s;

	float g = x.r->cfg.rope_base_global;
	x.r->cfg.rope_base_global = x.r->cfg.rope_base_local;
	x.r->cfg.rope_base_local = g;
	run_forward(&x);
	cr_assert_not(golden_check_all(&x.g, x.logits, &s));
	fprintf(stderr, "reference: swapped rope bases give max rel %.3e\n", s.max_rel);
	cr_assert_gt(s.max_rel, 100 * x.g.rel_tol);
	x.r->cfg.rope_base_local = x.r->cfg.rope_base_global;
	x.r->cfg.rope_base_global = g;

	uint32_t w = x.r->cfg.sliding_window;
	x.r->cfg.sliding_window = 0; /* every layer attends to all positions */
	run_forward(&x);
	cr_assert_not(golden_check_all(&x.g, x.logits, &s));
	cr_assert_gt(s.max_rel, 100 * x.g.rel_tol);
	/* Positions inside the window are unaffected, which proves the window is where we put it. */
	struct golden_row r;
	golden_check_row(&x.g, w - 1, x.logits + (size_t)(w - 1) * x.g.n_vocab, &r);
	cr_assert(r.ok, "position %u lies inside the window, rel %.3e", w - 1, r.rel);
	x.r->cfg.sliding_window = w;

	/* Restored config: passes again (the perturbations left no state behind). */
	run_forward(&x);
	cr_assert(golden_check_all(&x.g, x.logits, &s), "max rel %.3e", s.max_rel);
	run_close(&x);
}

/* Decoding token by token after a rewind gives the same logits as the first pass,
 * and bad calls are refused with the documented codes. */
Test(reference, rewind_and_errors, .timeout = 60)
{
	struct run x;
	run_open(&x, "q8_0");
	uint32_t V = x.g.n_vocab, n = 12;
	float *row = malloc(V * sizeof(float));
	cr_assert_not_null(row);
	cr_assert_eq(ref_forward_tokens(x.r, x.g.tokens, n, x.logits), 0, "%s", err_msg());
	/* rewind to position 5 and replay */
	for (uint32_t t = 5; t < n; t++) {
		cr_assert_eq(ref_forward(x.r, x.g.tokens[t], t, row), 0, "%s", err_msg());
		cr_assert_arr_eq(row, x.logits + (size_t)t * V, V * sizeof(float), "position %u", t);
	}
	cr_assert_eq(ref_forward(x.r, V, n, row), ERR_INVAL);              /* token out of range */
	cr_assert_eq(ref_forward(x.r, 1, n + 1, row), ERR_STATE);          /* gap in positions */
	cr_assert_eq(ref_forward(x.r, 1, x.r->max_ctx, row), ERR_INVAL);   /* beyond the context */
	cr_assert_eq(x.r->max_ctx, x.m->cfg.n_ctx);
	free(row);
	run_close(&x);

	/* a caller-given context caps positions */
	struct golden g;
	struct model *m;
	struct ref_model *r;
	cr_assert_eq(golden_load("q4_0", &g), 0, "%s", err_msg());
	cr_assert_eq(model_open(g.model_path, &m), 0, "%s", err_msg());
	cr_assert_eq(ref_create(m, 4, &r), 0, "%s", err_msg());
	float *lg = malloc((size_t)5 * g.n_vocab * sizeof(float));
	cr_assert_not_null(lg);
	cr_assert_eq(ref_forward_tokens(r, g.tokens, 5, lg), ERR_INVAL);
	cr_assert_eq(ref_forward_tokens(r, g.tokens, 4, lg), 0, "%s", err_msg());
	free(lg);
	ref_destroy(r);
	model_close(m);
	golden_free(&g);
}

/* The golden helper itself: the reference passes against itself, and a 0.1%
 * perturbation or a moved argmax fails the f32 tolerance. */
Test(reference, golden_helper_checks)
{
	struct golden g;
	cr_assert_eq(golden_load("f32", &g), 0, "%s", err_msg());
	cr_assert_eq(g.n_tokens, 48);
	cr_assert_eq(g.n_vocab, 32000);
	cr_assert_eq(g.tokens[0], 1);
	cr_assert_float_eq(g.rel_tol, 1e-4, 1e-12);
	float *row = malloc(g.n_vocab * sizeof(float));
	cr_assert_not_null(row);
	struct golden_row r;

	memcpy(row, g.logits, g.n_vocab * sizeof(float));
	golden_check_row(&g, 0, row, &r);
	cr_assert(r.ok);
	cr_assert_eq(r.rel, 0.0);
	cr_assert_eq(r.argmax_ref, g.greedy_next[0]);

	for (uint32_t i = 0; i < g.n_vocab; i++)
		row[i] *= 1.001f;
	golden_check_row(&g, 0, row, &r);
	cr_assert_not(r.ok);
	cr_assert_float_eq(r.rel, 1e-3, 1e-5);

	memcpy(row, g.logits, g.n_vocab * sizeof(float));
	row[(r.argmax_ref + 1) % g.n_vocab] = row[r.argmax_ref] + 0.01f;
	golden_check_row(&g, 0, row, &r);
	cr_assert_neq(r.argmax_ours, r.argmax_ref);
	cr_assert_not(r.ok);

	memcpy(row, g.logits, g.n_vocab * sizeof(float));
	row[7] = NAN;
	golden_check_row(&g, 0, row, &r);
	cr_assert_not(r.ok);
	free(row);
	golden_free(&g);

	cr_assert_eq(golden_load("no-such-encoding", &g), ERR_NOTFOUND);
}

/* Run `unicorn logits` with the given engine option on all 48 golden tokens
 * (crossing the command's 32-row chunks) and check the file against the f32
 * goldens. */
static void check_cli_engine(const char *bin, const struct golden *g, const char *engine_opt, const char *out)
{
	uint32_t n = g->n_tokens;
	char cmd[8192];
	int k = snprintf(cmd, sizeof cmd, "'%s/unicorn' logits '%s' %s -o '%s' --tokens ",
			 bin, g->model_path, engine_opt, out);
	for (uint32_t t = 0; t < n; t++)
		k += snprintf(cmd + k, sizeof cmd - k, "%s%u", t ? "," : "", g->tokens[t]);
	snprintf(cmd + k, sizeof cmd - k, " 2>/dev/null");
	cr_assert_eq(system(cmd), 0, "%s", cmd);

	FILE *f = fopen(out, "rb");
	cr_assert_not_null(f);
	float *rows = malloc((size_t)n * g->n_vocab * sizeof(float));
	cr_assert_not_null(rows);
	cr_assert_eq(fread(rows, sizeof(float), (size_t)n * g->n_vocab, f), (size_t)n * g->n_vocab);
	cr_assert_eq(fgetc(f), EOF, "file longer than [%u][%u]", n, g->n_vocab);
	fclose(f);
	for (uint32_t t = 0; t < n; t++) {
		struct golden_row r;
		golden_check_row(g, t, rows + (size_t)t * g->n_vocab, &r);
		cr_assert(r.ok, "%s: position %u: rel %.3e", engine_opt, t, r.rel);
	}
	free(rows);
}

/* `unicorn logits` writes the golden layout with the reference, the default
 * (Vulkan, prefill kernels) and the Vulkan decode kernels. Needs the built
 * binary (UNICORN_BIN, set by `make test`). */
Test(reference, cli_logits, .timeout = 60)
{
	const char *bin = getenv("UNICORN_BIN");
	if (!bin || !*bin)
		cr_skip_test("UNICORN_BIN not set");
	struct golden g;
	cr_assert_eq(golden_load("f32", &g), 0, "%s", err_msg());
	char out[] = "/tmp/unicorn-logits-XXXXXX";
	int fd = mkstemp(out);
	cr_assert_geq(fd, 0);
	close(fd);
	check_cli_engine(bin, &g, "--engine reference", out);
	/* vulkan is the default; f32 weights against the 1e-4 goldens want an f32 KV cache */
	check_cli_engine(bin, &g, "--kv-type f32", out);
	check_cli_engine(bin, &g, "--engine vulkan-decode --kv-type f32", out);
	/* --last 3: the last three rows only, the same numbers */
	{
		char cmd[8192];
		int k = snprintf(cmd, sizeof cmd, "'%s/unicorn' logits '%s' --engine reference --last 3 -o '%s' --tokens ",
				 bin, g.model_path, out);
		for (uint32_t t = 0; t < g.n_tokens; t++)
			k += snprintf(cmd + k, sizeof cmd - k, "%s%u", t ? "," : "", g.tokens[t]);
		snprintf(cmd + k, sizeof cmd - k, " 2>/dev/null");
		cr_assert_eq(system(cmd), 0, "%s", cmd);
		FILE *f = fopen(out, "rb");
		cr_assert_not_null(f);
		float *rows = malloc((size_t)3 * g.n_vocab * sizeof(float));
		cr_assert_not_null(rows);
		cr_assert_eq(fread(rows, sizeof(float), (size_t)3 * g.n_vocab, f), (size_t)3 * g.n_vocab);
		cr_assert_eq(fgetc(f), EOF, "--last 3 wrote more than 3 rows");
		fclose(f);
		for (uint32_t t = 0; t < 3; t++) {
			struct golden_row r;
			golden_check_row(&g, g.n_tokens - 3 + t, rows + (size_t)t * g.n_vocab, &r);
			cr_assert(r.ok, "--last 3: row %u: rel %.3e", t, r.rel);
		}
		free(rows);
	}

	/* an unknown engine is a usage error and leaves no file behind */
	unlink(out);
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "'%s/unicorn' logits '%s' --engine cuda --tokens 1,2 -o '%s' 2>/dev/null",
		 bin, g.model_path, out);
	int st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "exit status %d for --engine cuda", st);
	cr_assert_neq(access(out, F_OK), 0, "output file left behind");

	/* bad ids are usage errors */
	snprintf(cmd, sizeof cmd, "'%s/unicorn' logits '%s' --engine reference --tokens 1,%u -o '%s' 2>/dev/null",
		 bin, g.model_path, g.n_vocab, out);
	st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "exit status %d for id n_vocab", st);
	golden_free(&g);
}
