/* The batch matvec kernel (shaders/mul_mvs.glsl, MVS_BATCH: several token
 * columns per workgroup) against the single-token kernel: every row of an
 * engine_forward_batch step must be bitwise the logits the same token gives
 * alone (engine_forward of one token runs mul_mvs). Batch sizes that are not
 * a multiple of the token group, all weight types the golden and mkmodel
 * models cover, and the shared-memory reduction (UNICORN_VK_MVS_BPT=1 makes
 * rows wider than a subgroup). Criterion runs each test in its own process,
 * so the environment set here stays local to the test. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_worker/engine.h"
#include "common/err.h"
#include "formats/model.h"
#include "formats/quant.h"
#include "tests/golden.h"
#include "tools/mkmodel.h"

static void setopt(const char *name, const char *val)
{
	if (val)
		cr_assert_eq(setenv(name, val, 1), 0);
	else
		cr_assert_eq(unsetenv(name), 0);
}

/* n sequences at different positions (0, short histories, one past the
 * sliding window of 8): each batch row bitwise equals the lone run. */
static void check_model(const char *path, uint32_t n, const char *label)
{
	struct model *m;
	struct engine *e;
	cr_assert_eq(model_open(path, &m), 0, "model_open(%s): %s", path, err_msg());
	struct engine_opts o = { .max_ctx = 32, .max_batch = 16, .n_split = 4, .max_seqs = n + 1 };
	cr_assert_eq(engine_create(m, &o, &e), 0, "engine_create: %s", err_msg());
	cr_assert_geq(engine_batch_max(e), n);
	size_t V = m->cfg.n_vocab;
	uint32_t hist[12], bt[16], bs[16], bp[16];
	for (uint32_t k = 0; k < 12; k++)
		hist[k] = 2 + (k * 7919u + 13u) % 900u;
	for (uint32_t i = 0; i < n; i++) {
		bs[i] = i;
		bp[i] = i % 5 == 4 ? 10 : i % 4; /* history length = position */
		bt[i] = 2 + (i * 104729u + 7u) % 900u;
		cr_assert_eq(engine_seq_select(e, i), 0);
		if (bp[i])
			cr_assert_eq(engine_forward(e, hist + (i % 2), bp[i], 0, NULL, false), 0, "%s", err_msg());
	}
	float *alone = malloc(n * V * sizeof *alone), *batch = malloc(n * V * sizeof *batch);
	cr_assert(alone && batch);
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(engine_seq_select(e, i), 0);
		cr_assert_eq(engine_forward(e, &bt[i], 1, bp[i], alone + i * V, false), 0, "%s", err_msg());
	}
	cr_assert_eq(engine_seq_select(e, n), 0);
	/* the batch rewrites the same KV rows with the same values */
	cr_assert_eq(engine_forward_batch(e, n, bt, bs, bp, ENGINE_BATCH_LOGITS, 0, NULL, batch), 0, "%s", err_msg());
	for (uint32_t i = 0; i < n; i++) {
		const float *a = alone + i * V, *b = batch + i * V;
		size_t first = V;
		for (size_t j = 0; j < V && first == V; j++)
			if (memcmp(&a[j], &b[j], sizeof *a))
				first = j;
		cr_assert_eq(first, V, "%s n=%u: row %u (pos %u) logit %zu: batch %.9g alone %.9g", label, n, i, bp[i],
			     first, first < V ? b[first] : 0.0, first < V ? a[first] : 0.0);
	}
	/* the rows are real, distinct numbers (not one row copied everywhere) */
	cr_assert(n < 2 || memcmp(batch, batch + V, V * sizeof *batch) != 0, "%s: rows 0 and 1 identical", label);
	for (size_t j = 0; j < V; j++)
		cr_assert(batch[j] == batch[j] && batch[j] > -1e30f && batch[j] < 1e30f, "%s: logit %zu = %g", label, j,
			  batch[j]);
	free(alone);
	free(batch);
	engine_destroy(e);
	model_close(m);
}

/* The group kernel from one group's rows (the engine takes it from
 * MVB_MIN_TOK), unless the test chose the per-token path. */
static void batch_kernel_from_one_group(void)
{
	if (!getenv("UNICORN_VK_BATCH_MV"))
		setopt("UNICORN_VK_BATCH_MV", "group");
}

static void check_golden(const char *enc, const char *bpt, const char *nt)
{
	batch_kernel_from_one_group();
	setopt("UNICORN_VK_MVS_BPT", bpt);
	setopt("UNICORN_VK_BATCH_T", nt);
	struct golden g;
	cr_assert_eq(golden_load(enc, &g), 0, "golden_load(%s): %s", enc, err_msg());
	char label[64];
	snprintf(label, sizeof label, "%s bpt=%s T=%s", enc, bpt ? bpt : "-", nt ? nt : "-");
	check_model(g.model_path, 5, label);
	check_model(g.model_path, 13, label);
	golden_free(&g);
}

Test(mvbatch, q8_0, .timeout = 120) { check_golden("q8_0", NULL, NULL); }
Test(mvbatch, q8_0_shared_reduction, .timeout = 120) { check_golden("q8_0", "1", NULL); }
Test(mvbatch, q4_0_t8_shared_reduction, .timeout = 120) { check_golden("q4_0", "1", "8"); }
Test(mvbatch, f32_t3, .timeout = 120) { check_golden("f32", NULL, "3"); }
/* the per-token-column kernel stays selectable (A/B) and equal too */
Test(mvbatch, q8_0_tokens_path, .timeout = 120)
{
	setopt("UNICORN_VK_BATCH_MV", "tokens");
	check_golden("q8_0", NULL, NULL);
}

static void check_mkmodel(uint32_t type, const char *bpt)
{
	batch_kernel_from_one_group();
	setopt("UNICORN_VK_MVS_BPT", bpt);
	char dir[] = "/tmp/unicorn-test-mvb-XXXXXX", path[64];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/m.gguf", dir);
	struct mkmodel_opts mo = { .shape = "tiny", .layers = 2, .type = type, .seed = 3, .format = MKMODEL_GGUF,
				   .out = path, .synthetic_vocab = true, .quiet = true, .threads = 2 };
	cr_assert_eq(mkmodel_run(&mo), 0, "mkmodel: %s", err_msg());
	check_model(path, 5, type == TENSOR_F16 ? "f16" : "bf16");
	check_model(path, 13, type == TENSOR_F16 ? "f16" : "bf16");
	unlink(path);
	rmdir(dir);
}

Test(mvbatch, f16, .timeout = 120) { check_mkmodel(TENSOR_F16, NULL); }
Test(mvbatch, bf16_shared_reduction, .timeout = 120) { check_mkmodel(TENSOR_BF16, "1"); }
