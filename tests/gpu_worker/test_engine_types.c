/* Whole models whose matrices are one of the preset types (what a
 * llama-quantize "_M" file mixes): the engine's logits against the CPU
 * reference on the same file, through the prefill (mul_mm, 20 tokens) and the
 * decode kernels (mul_mvs). The K types and IQ4_XS need rows that are
 * multiples of 256: mkmodel's tiny256 shape. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_worker/engine.h"
#include "common/err.h"
#include "formats/model.h"
#include "formats/quant.h"
#include "ref/ref.h"
#include "tools/mkmodel.h"

/* rel = |a - b| / |b| over the vocabulary; the argmax must agree where the
 * reference's top logit leads by >= 0.02 (golden/README.md tolerances). */
static void compare(const float *got, const float *want, size_t V, const char *what)
{
	double d = 0, n = 0;
	size_t ag = 0, aw = 0;
	for (size_t j = 0; j < V; j++) {
		if (!isfinite(want[j]))
			continue;
		d += ((double)got[j] - want[j]) * ((double)got[j] - want[j]);
		n += (double)want[j] * want[j];
		if (got[j] > got[ag])
			ag = j;
		if (want[j] > want[aw])
			aw = j;
	}
	float second = -INFINITY;
	for (size_t j = 0; j < V; j++)
		if (j != aw && want[j] > second)
			second = want[j];
	cr_assert_leq(sqrt(d / n), 5e-3, "%s: relative error %g", what, sqrt(d / n));
	cr_assert(ag == aw || want[aw] - second < 0.02f, "%s: argmax %zu vs reference %zu", what, ag, aw);
}

static const uint32_t types[] = { TENSOR_Q4_1, TENSOR_Q5_0, TENSOR_Q5_1, TENSOR_IQ4_NL,
				   TENSOR_Q2_K, TENSOR_Q3_K, TENSOR_Q5_K, TENSOR_IQ4_XS };

ParameterizedTestParameters(engine_types, model)
{
	return cr_make_param_array(uint32_t, (void *)types, sizeof types / sizeof types[0]);
}

/* layers of check_model's models (the tiny shapes' sixth is global) and
 * tokens of its prompt (at most 60: max_ctx 64 holds the 3 decode steps) */
static uint32_t check_layers = 2, check_prompt = 20;

/* engine_kernels() of check_model's engine */
static char kernels[240];

/* One model of the type on the given shape against the reference; returns
 * the bytes the engine uploaded regrouped (gpu_worker/regroup.h). */
static uint64_t check_model(uint32_t type, const char *shape, enum engine_import imp)
{
	const char *tn = quant_type_info(type)->name;
	char dir[] = "/tmp/unicorn-test-types-XXXXXX", path[64];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/m.gguf", dir);
	struct mkmodel_opts mo = { .shape = shape, .layers = check_layers, .type = type, .seed = 5, .format = MKMODEL_GGUF,
				   .out = path, .synthetic_vocab = true, .quiet = true, .threads = 2 };
	cr_assert_eq(mkmodel_run(&mo), 0, "mkmodel %s: %s", tn, err_msg());
	struct model *m;
	cr_assert_eq(model_open(path, &m), 0, "%s", err_msg());
	size_t nt = 0;
	for (size_t i = 0; i < m->n_tensors; i++)
		nt += m->tensors[i].type == type;
	cr_assert_geq(nt, 8, "%s: %zu tensors of the type", tn, nt);
	struct engine *e;
	struct engine_opts o = { .max_ctx = 64, .max_batch = 32, .n_split = 4, .weights_import = imp };
	cr_assert_eq(engine_create(m, &o, &e), 0, "engine_create: %s", err_msg());
	struct ref_model *r;
	cr_assert_eq(ref_create(m, 64, &r), 0, "%s", err_msg());
	size_t V = m->cfg.n_vocab;
	enum { D = 3 };
	const uint32_t P = check_prompt;
	uint32_t tok[64];
	cr_assert_leq(P + D, 64);
	for (uint32_t i = 0; i < P + D; i++)
		tok[i] = 3 + (i * 7919u + 11u) % 900u;
	float *want = malloc((P + D) * V * sizeof *want), *got = malloc(P * V * sizeof *got);
	cr_assert(want && got);
	cr_assert_eq(ref_forward_tokens(r, tok, P + D, want), 0, "%s", err_msg());
	cr_assert_eq(engine_forward(e, tok, P, 0, got, true), 0, "%s", err_msg());
	char what[64];
	for (uint32_t t = 0; t < P; t++) {
		snprintf(what, sizeof what, "%s prefill row %u", tn, t);
		compare(got + t * V, want + t * V, V, what);
	}
	for (uint32_t t = P; t < P + D; t++) {
		cr_assert_eq(engine_forward(e, &tok[t], 1, t, got, false), 0, "%s", err_msg());
		snprintf(what, sizeof what, "%s decode pos %u", tn, t);
		compare(got, want + t * V, V, what);
	}
	/* the prompt again, the logits of its last row only (what generation
	 * reads after a prompt: mul_mvs on the final norm's rows, x16 where it
	 * runs, after the decode steps above left their copies behind) */
	cr_assert_eq(engine_forward(e, tok, P, 0, got, false), 0, "%s", err_msg());
	snprintf(what, sizeof what, "%s prompt's last row", tn);
	compare(got, want + (P - 1) * V, V, what);
	uint64_t regrouped = engine_weights_regrouped(e);
	snprintf(kernels, sizeof kernels, "%s", engine_kernels(e));
	free(want);
	free(got);
	ref_destroy(r);
	engine_destroy(e);
	model_close(m);
	unlink(path);
	rmdir(dir);
	return regrouped;
}

ParameterizedTest(const uint32_t *type, engine_types, model, .timeout = 120)
{
	check_model(*type, quant_type_info(*type)->block_elems == QK_K ? "tiny256" : "tiny", ENGINE_IMPORT_AUTO);
}

/* Q4_0 rows of 256-element multiples are uploaded regrouped (every matrix of
 * the tiny256 shape): prefill, decode, embeddings and logits on the regrouped
 * kernels against the reference. Imported weights keep the file's layout. */
Test(engine_types, q4_0_regrouped, .timeout = 120)
{
	cr_assert_gt(check_model(TENSOR_Q4_0, "tiny256", ENGINE_IMPORT_UPLOAD), 0, "nothing was regrouped");
	setenv("UNICORN_VK_REGROUP", "0", 1);
	cr_assert_eq(check_model(TENSOR_Q4_0, "tiny256", ENGINE_IMPORT_UPLOAD), 0);
}

/* The tiny shape's rows (128 and 384 elements, as 1B's 1152) end in a half
 * group: every matrix regrouped with the longer rows, the same tolerances. */
Test(engine_types, q4_0_regrouped_half_groups, .timeout = 120)
{
	cr_assert_gt(check_model(TENSOR_Q4_0, "tiny", ENGINE_IMPORT_UPLOAD), 0, "nothing was regrouped");
	cr_assert(strstr(kernels, "x16 integer dot products") != NULL, "x16 kernels not in use: %s", kernels);
	/* and with the norm tail writing the x16 copies */
	setenv("UNICORN_VK_NORM_TAIL", "1536", 1);
	check_model(TENSOR_Q4_0, "tiny", ENGINE_IMPORT_UPLOAD);
	cr_assert(strstr(kernels, "x16 integer dot products") != NULL, "x16 kernels not in use: %s", kernels);
}

/* The x16 kernels (gpu_worker/x16.h: qkv, gate/up and logits against rmsnorm's
 * result as 16-bit integers, on devices with integer dot products) within the
 * same tolerances: with rmsnorm dispatches writing the copies, with the norm
 * tail writing them (tiny256's rows are short enough for it), and off. */
/* check_model on uploaded q4_0 weights of the shape, then whether the
 * engine's kernel description has `says` (present) or not */
static void check_q4_0_kernels(const char *shape, const char *says, bool present)
{
	check_model(TENSOR_Q4_0, shape, ENGINE_IMPORT_UPLOAD);
	cr_assert((strstr(kernels, says) != NULL) == present, "%s \"%s\" in the kernels: %s", present ? "no" : "unexpected",
		  says, kernels);
}

Test(engine_types, q4_0_x16, .timeout = 120)
{
	/* (not just "x16": matrix cores' "16x16x16" has it) */
	check_q4_0_kernels("tiny256", "x16 integer dot products", true);
	setenv("UNICORN_VK_NORM_TAIL", "1536", 1);
	check_q4_0_kernels("tiny256", "x16 integer dot products", true);
	setenv("UNICORN_VK_X16", "0", 1);
	check_q4_0_kernels("tiny256", "x16 integer dot products", false);
}

/* wo on x16 from attention's rows (shaders/attn_x16.glsl: the default from
 * 4096 columns, UNICORN_VK_WO_X16=1 at any width) on 128-wide heads (the
 * tinyh128 shape): within the same tolerances in decode steps of one split
 * (the copy from registers) and through attn_combine (six layers, a 40-token
 * prompt and UNICORN_VK_ATTN_CHUNK=16: the global sixth layer's 41+ keys are
 * two splits of 32; the copy from the combined row), and not in use where the
 * width is below the default's. */
Test(engine_types, q4_0_wo_x16, .timeout = 120)
{
	check_q4_0_kernels("tinyh128", "after rmsnorm)", true); /* 256 columns: not by default */
	setenv("UNICORN_VK_WO_X16", "1", 1);
	check_q4_0_kernels("tinyh128", "after rmsnorm and attention", true);
	setenv("UNICORN_VK_ATTN_CHUNK", "16", 1);
	check_layers = 6;
	check_prompt = 40;
	check_q4_0_kernels("tinyh128", "after rmsnorm and attention", true);
}

/* Down on x16 from the GLU's rows (shaders/mul_mvs.glsl FFN_X16: the default
 * from 8192 columns, UNICORN_VK_DOWN_X16=1 at any width): decode within the
 * same tolerances, on its own and beside wo on x16, and not in use where the
 * width is below the default's. */
Test(engine_types, q4_0_down_x16, .timeout = 120)
{
	check_q4_0_kernels("tiny256", "after rmsnorm)", true);
	setenv("UNICORN_VK_DOWN_X16", "1", 1);
	check_q4_0_kernels("tiny256", "after rmsnorm and the GLU", true);
	setenv("UNICORN_VK_WO_X16", "1", 1);
	check_q4_0_kernels("tinyh128", "after rmsnorm, attention and the GLU", true);
}
