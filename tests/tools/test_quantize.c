/* Tests for `unicorn quantize` (tools/quantize.c): the golden tiny model,
 * the presets, and each --type end to end through the Vulkan engine. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "formats/gguf.h"
#include "formats/model.h"
#include "formats/quant.h"
#include "ref/ref.h"
#include "tests/golden.h"
#include "tools/mkmodel.h"
#include "tools/quantize.h"

static char qdir[256];

static void q_init(void)
{
	snprintf(qdir, sizeof qdir, "/tmp/unicorn-test-qz-XXXXXX");
	cr_assert_not_null(mkdtemp(qdir));
}

static void q_fini(void)
{
	DIR *d = opendir(qdir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[600];
		snprintf(p, sizeof p, "%s/%s", qdir, e->d_name);
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(qdir);
}

static const char *qpath(const char *name)
{
	static char b[4][600];
	static int k;
	char *p = b[k++ & 3];
	snprintf(p, 600, "%s/%s", qdir, name);
	return p;
}

static const char *golden(const char *name)
{
	static char b[4][1024];
	static int k;
	char *p = b[k++ & 3];
	snprintf(p, 1024, "%s/golden/%s", golden_shared_dir(), name);
	return p;
}

static void quantize(const char *in, const char *out, uint32_t type)
{
	struct quantize_opts o = { .in = in, .out = out, .type = type, .quiet = true };
	cr_assert_eq(quantize_run(&o), 0, "quantize %s: %s", in, err_msg());
}

/* general.file_type of a GGUF file. */
static uint64_t file_type_of(const char *path)
{
	struct gguf *g;
	uint64_t ft;
	cr_assert_eq(gguf_open(path, &g), 0, "%s", err_msg());
	cr_assert_eq(gguf_get_u64(g, "general.file_type", &ft), 0, "%s", err_msg());
	gguf_close(g);
	return ft;
}

/* Every weight of q within the block-quantization error of the f32 original:
 * q8_0 stores round(x/d) with d = amax/127 as f16, so |err| <= d/2 plus the
 * f16 rounding of d over |q| <= 127 (127 * d * 2^-11): 0.57 d. q4_0 is
 * d = amax/8 (one side) with 16 levels: |err| <= d/2 except the clamped end,
 * bounded by d. Norms must be exact. */
static void check_close(const struct model *q, const struct model *f, double frac)
{
	static float a[128 * 384], b[128 * 384];
	cr_assert_eq(q->n_tensors, f->n_tensors);
	for (size_t i = 0; i < f->n_tensors; i++) {
		const struct model_tensor *tf = &f->tensors[i], *tq = model_find(q, tf->name);
		cr_assert_not_null(tq, "%s missing", tf->name);
		cr_assert_eq(tq->ne[0], tf->ne[0]);
		cr_assert_eq(tq->ne[1], tf->ne[1]);
		uint64_t ne0 = tf->ne[0], rows = tf->ne[1];
		bool norm = strstr(tf->name, "norm") != NULL;
		for (uint64_t r0 = 0; r0 < rows; r0 += 384) {
			uint64_t nr = rows - r0 < 384 ? rows - r0 : 384;
			cr_assert_eq(model_tensor_rows_f32(tf, r0, nr, a), 0, "%s", err_msg());
			cr_assert_eq(model_tensor_rows_f32(tq, r0, nr, b), 0, "%s", err_msg());
			if (norm) {
				cr_assert_eq(tq->type, TENSOR_F32, "%s not f32", tf->name);
				cr_assert(!memcmp(a, b, nr * ne0 * 4), "%s: norm weights changed", tf->name);
				continue;
			}
			for (uint64_t blk = 0; blk < nr * ne0; blk += 32) {
				float amax = 0;
				for (int j = 0; j < 32; j++)
					amax = fmaxf(amax, fabsf(a[blk + j]));
				double bound = frac * amax + 1e-12;
				for (int j = 0; j < 32; j++)
					cr_assert(fabs((double)a[blk + j] - b[blk + j]) <= bound,
						  "%s elem %llu: %g vs %g (bound %g)", tf->name,
						  (unsigned long long)(r0 * ne0 + blk + j), a[blk + j], b[blk + j], bound);
			}
		}
	}
}

Test(quantize, hf_to_q8_0_weights, .init = q_init, .fini = q_fini)
{
	quantize(golden("gemma3-tiny-hf"), qpath("q8.gguf"), TENSOR_Q8_0);
	struct model *q, *f;
	cr_assert_eq(model_open(qpath("q8.gguf"), &q), 0, "model_open: %s", err_msg());
	cr_assert_eq(model_open(golden("gemma3-tiny-hf"), &f), 0, "%s", err_msg());
	cr_assert_eq(q->format, MODEL_GGUF);
	cr_assert_eq(q->tok_embd->type, TENSOR_Q8_0);
	cr_assert_eq(q->layers[0].wq->type, TENSOR_Q8_0);
	cr_assert_eq(q->output_norm->type, TENSOR_F32);
	cr_assert_eq(q->output_norm->norm_offset, 0.0f, "GGUF norms hold 1+w");
	cr_assert_eq(q->cfg.n_embd, f->cfg.n_embd);
	cr_assert_eq(q->cfg.n_layer, f->cfg.n_layer);
	cr_assert_eq(q->cfg.n_vocab, f->cfg.n_vocab);
	cr_assert_eq(q->cfg.sliding_window, f->cfg.sliding_window);
	cr_assert_eq(q->cfg.head_dim, f->cfg.head_dim);
	cr_assert_float_eq(q->cfg.query_pre_attn_scalar, f->cfg.query_pre_attn_scalar, 0);
	for (uint32_t i = 0; i < f->cfg.n_layer; i++)
		cr_assert_eq(q->cfg.layer_global[i], f->cfg.layer_global[i]);
	check_close(q, f, 0.57 / 127);
	model_close(q);
	model_close(f);
}

Test(quantize, gguf_to_q4_0_keeps_tokenizer, .init = q_init, .fini = q_fini)
{
	quantize(golden("gemma3-tiny-f32.gguf"), qpath("q4.gguf"), TENSOR_Q4_0);
	struct model *q, *f;
	cr_assert_eq(model_open(qpath("q4.gguf"), &q), 0, "model_open: %s", err_msg());
	cr_assert_eq(model_open(golden("gemma3-tiny-f32.gguf"), &f), 0, "%s", err_msg());
	cr_assert_eq(q->tok_embd->type, TENSOR_Q4_0);
	check_close(q, f, 1.0 / 8 + 1e-3);
	model_close(q);
	model_close(f);
	/* tokenizer copied from the input */
	struct gguf *g, *src;
	cr_assert_eq(gguf_open(qpath("q4.gguf"), &g), 0);
	cr_assert_eq(gguf_open(golden("gemma3-tiny-f32.gguf"), &src), 0);
	const struct gguf_array *a, *b;
	cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.tokens", &a), 0);
	cr_assert_eq(gguf_get_arr(src, "tokenizer.ggml.tokens", &b), 0);
	cr_assert_eq(a->n, b->n);
	cr_assert_eq(a->offsets[a->n], b->offsets[b->n]);
	cr_assert(!memcmp(a->data, b->data, a->offsets[a->n]));
	uint64_t id;
	cr_assert_eq(gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &id), 0);
	cr_assert_eq(id, 1, "the llama vocabulary's bos");
	gguf_close(g);
	cr_assert_eq(file_type_of(qpath("q4.gguf")), 2);
	gguf_close(src);
}

/* The quantized file meets the golden tolerances: our q8_0 of the HF
 * checkpoint is the golden q8_0 encoding, so the reference forward pass on it
 * must match the golden q8_0 logits (computed independently in float64). */
Test(quantize, q8_0_meets_golden, .init = q_init, .fini = q_fini, .timeout = 120)
{
	quantize(golden("gemma3-tiny-hf"), qpath("q8.gguf"), TENSOR_Q8_0);
	struct golden gd;
	cr_assert_eq(golden_load("q8_0", &gd), 0, "%s", err_msg());
	struct model *m;
	cr_assert_eq(model_open(qpath("q8.gguf"), &m), 0, "%s", err_msg());
	struct ref_model *r;
	cr_assert_eq(ref_create(m, gd.n_tokens, &r), 0, "%s", err_msg());
	model_close(m);
	float *logits = malloc((size_t)gd.n_tokens * gd.n_vocab * sizeof(float));
	cr_assert_not_null(logits);
	cr_assert_eq(ref_forward_tokens(r, gd.tokens, gd.n_tokens, logits), 0, "%s", err_msg());
	struct golden_summary s;
	bool ok = golden_check_all(&gd, logits, &s);
	cr_assert(ok, "q8_0 quantized: %u positions fail, max rel %g at %u", s.n_fail, s.max_rel, s.worst_pos);
	free(logits);
	ref_destroy(r);
	golden_free(&gd);
}

/* A 256-wide type on tiny's 128-wide rows takes llama.cpp's fall-back
 * (Q6_K -> Q8_0) for every matrix and the embedding; the file type still
 * names the requested type. */
Test(quantize, k_type_falls_back, .init = q_init, .fini = q_fini)
{
	quantize(golden("gemma3-tiny-f32.gguf"), qpath("k.gguf"), TENSOR_Q6_K);
	struct model *q;
	cr_assert_eq(model_open(qpath("k.gguf"), &q), 0, "model_open: %s", err_msg());
	for (size_t i = 0; i < q->n_tensors; i++) {
		const struct model_tensor *t = &q->tensors[i];
		uint32_t want = t->n_dims < 2 ? TENSOR_F32 : TENSOR_Q8_0;
		cr_expect_eq(t->type, want, "%s: %s", t->name, quant_ggml_type_name(t->type));
	}
	model_close(q);
	cr_expect_eq(file_type_of(qpath("k.gguf")), 18, "MOSTLY_Q6_K");
}

/* q4_k_m on a tiny256 model: the preset's mix, tensor by tensor, and
 * general.file_type 15. */
Test(quantize, preset_q4_k_m, .init = q_init, .fini = q_fini)
{
	struct mkmodel_opts mo = { .shape = "tiny256", .type = TENSOR_F32, .seed = 5, .format = MKMODEL_GGUF,
				   .out = qpath("f32.gguf"), .synthetic_vocab = true, .threads = 2, .quiet = true };
	cr_assert_eq(mkmodel_run(&mo), 0, "%s", err_msg());
	struct quantize_opts o = { .in = qpath("f32.gguf"), .out = qpath("m.gguf"), .quiet = true };
	cr_assert_eq(quant_preset_parse("q4_k_m", &o.type, &o.preset), 0);
	cr_assert_eq(quantize_run(&o), 0, "%s", err_msg());
	struct model *q;
	cr_assert_eq(model_open(qpath("m.gguf"), &q), 0, "model_open: %s", err_msg());
	cr_expect_eq(q->tok_embd->type, TENSOR_Q6_K, "the tied output");
	for (uint32_t l = 0; l < q->cfg.n_layer; l++) {
		bool more = l == 2 || l == 5; /* use_more_bits of 6 layers */
		const struct model_layer *y = &q->layers[l];
		cr_expect_eq(y->wq->type, TENSOR_Q4_K, "layer %u", l);
		cr_expect_eq(y->wk->type, TENSOR_Q4_K, "layer %u", l);
		cr_expect_eq(y->wv->type, more ? TENSOR_Q6_K : TENSOR_Q4_K, "layer %u", l);
		cr_expect_eq(y->wo->type, TENSOR_Q5_0, "layer %u: 128-wide rows fall back", l);
		cr_expect_eq(y->ffn_gate->type, TENSOR_Q4_K, "layer %u", l);
		cr_expect_eq(y->ffn_up->type, TENSOR_Q4_K, "layer %u", l);
		cr_expect_eq(y->ffn_down->type, more ? TENSOR_Q6_K : TENSOR_Q4_K, "layer %u", l);
		cr_expect_eq(y->attn_norm->type, TENSOR_F32, "layer %u", l);
	}
	model_close(q);
	cr_expect_eq(file_type_of(qpath("m.gguf")), 15, "MOSTLY_Q4_K_M");
}

Test(quantize, errors, .init = q_init, .fini = q_fini)
{
	struct stat st;
	struct quantize_opts o = { .in = qpath("missing.gguf"), .out = qpath("k.gguf"), .type = TENSOR_Q8_0,
				   .quiet = true };
	cr_assert_neq(quantize_run(&o), 0);
	cr_assert_neq(stat(qpath("k.gguf"), &st), 0);
	/* a type id this build cannot write is named, and no file is left */
	o.in = golden("gemma3-tiny-f32.gguf");
	o.type = 16; /* IQ2_XXS */
	cr_assert_eq(quantize_run(&o), ERR_UNSUP);
	cr_assert(strstr(err_msg(), "IQ2_XXS"), "%s", err_msg());
	cr_assert_neq(stat(qpath("k.gguf"), &st), 0);
	/* presets are GGUF only */
	struct mkmodel_opts mo = { .shape = "tiny", .type = TENSOR_Q4_K, .preset = QUANT_PRESET_Q4_K_M,
				   .format = MKMODEL_HF, .out = qpath("hf"), .quiet = true };
	cr_assert_eq(mkmodel_run(&mo), ERR_UNSUP);
	cr_assert(strstr(err_msg(), "q4_K_M"), "%s", err_msg());
}

Test(quantize, cli, .init = q_init, .fini = q_fini)
{
	const char *bin = getenv("UNICORN_BIN");
	if (!bin)
		cr_skip_test("UNICORN_BIN not set");
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "%s/unicorn quantize %s %s --type q8_0 -q", bin,
		 golden("gemma3-tiny-q8_0.gguf"), qpath("c.gguf"));
	cr_assert_eq(system(cmd), 0);
	struct model *m;
	cr_assert_eq(model_open(qpath("c.gguf"), &m), 0, "%s", err_msg());
	model_close(m);
	snprintf(cmd, sizeof cmd, "%s/unicorn quantize a b 2>/dev/null", bin);
	int st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "missing --type: status %d", st);
	/* an unknown type is a usage error naming what --type takes */
	snprintf(cmd, sizeof cmd, "%s/unicorn quantize a b --type q4_k_s 2>&1", bin);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	char out[1024] = "";
	out[fread(out, 1, sizeof out - 1, p)] = 0;
	st = pclose(p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "--type q4_k_s: status %d", st);
	cr_expect(strstr(out, "q4_k_s") && strstr(out, "q4_k_m") && strstr(out, "iq4_xs"), "%s", out);
	/* --help lists the presets */
	snprintf(cmd, sizeof cmd, "%s/unicorn quantize --help", bin);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	out[fread(out, 1, sizeof out - 1, p)] = 0;
	cr_assert_eq(pclose(p), 0);
	cr_expect(strstr(out, "q4_k_m") && strstr(out, "q5_k_m") && strstr(out, "q3_k_m"), "%s", out);
}

/* ---- end to end, one whole mixed-type model per --type ----
 * unicorn-mkmodel writes an f32 "tiny256" model (hidden 256, ffn 512:
 * K-quant and IQ4_XS blocks fit every matrix but attn_output, whose 128-wide
 * rows take the fall-back), `unicorn quantize --type T` converts it, `unicorn
 * inspect` must show the preset's file type and tensor types, and `unicorn
 * logits` on the Vulkan engine (lavapipe under `make test`) must match
 * `unicorn logits --engine reference` (the CPU reference on the file's own
 * dequantized weights) within the golden tolerances for quantized weights
 * (golden/README.md): relative L2 <= 5e-3 per position and equal argmax
 * wherever the reference's top-1 leads by >= 0.02. Needs UNICORN_BIN. */

#define E2E_TOKENS 40   /* crosses `unicorn logits`' 32-row chunks and the sliding window (8) */
#define E2E_VOCAB 32000 /* tiny256 keeps tiny's Llama vocabulary */

/* Run cmd with stderr to a log in the test's directory; on failure the
 * assertion shows the log's start. */
static void sh(const char *cmd)
{
	char full[8192], log[320], msg[600] = "";
	snprintf(log, sizeof log, "%s/stderr.log", qdir);
	snprintf(full, sizeof full, "%s 2>'%s'", cmd, log);
	int st = system(full);
	if (st) {
		FILE *f = fopen(log, "r");
		if (f) {
			msg[fread(msg, 1, sizeof msg - 1, f)] = 0;
			fclose(f);
		}
	}
	cr_assert_eq(st, 0, "failed (status %d): %s\n%s", st, cmd, msg);
}

static float *read_logits(const char *path)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	size_t n = (size_t)E2E_TOKENS * E2E_VOCAB;
	float *x = malloc(n * sizeof *x);
	cr_assert_not_null(x);
	cr_assert_eq(fread(x, sizeof *x, n, f), n, "%s: short", path);
	cr_assert_eq(fgetc(f), EOF, "%s: longer than [%d][%d]", path, E2E_TOKENS, E2E_VOCAB);
	fclose(f);
	return x;
}

/* `unicorn inspect --json` of path: file_type must be want_ft and the set of
 * tensor types exactly want_types (comma-separated, any order, case-blind). */
static void check_inspect(const char *bin, const char *path, const char *want_ft, const char *want_types)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "'%s/unicorn' inspect '%s' --json", bin, path);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	json_error_t e;
	json_t *j = json_loadf(p, 0, &e);
	cr_assert_eq(pclose(p), 0, "%s", cmd);
	cr_assert_not_null(j, "inspect: not JSON: %s", e.text);
	const char *ft = json_string_value(json_object_get(j, "file_type"));
	cr_expect(ft && !strcmp(ft, want_ft), "file_type %s, want %s", ft ? ft : "(none)", want_ft);
	json_t *by = json_object_get(json_object_get(j, "totals"), "tensors_by_type");
	cr_assert(json_is_object(by));
	size_t n_want = 0;
	char list[256];
	snprintf(list, sizeof list, "%s", want_types);
	for (char *sv, *tok = strtok_r(list, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
		n_want++;
		const char *key;
		json_t *v;
		bool found = false;
		json_object_foreach(by, key, v) found |= !strcasecmp(key, tok) && json_integer_value(v) > 0;
		cr_expect(found, "%s: no %s tensors", path, tok);
	}
	char *got = json_dumps(by, JSON_COMPACT);
	cr_expect_eq(json_object_size(by), n_want, "%s: tensor types %s, want %s", path, got, want_types);
	free(got);
	json_decref(j);
}

static void run_e2e(const char *type, const char *want_ft, const char *want_types)
{
	const char *bin = getenv("UNICORN_BIN");
	if (!bin || !*bin)
		cr_skip_test("UNICORN_BIN not set (run through make test)");
	char cmd[4096], f32[320], q[320], ref[320], vk[320];
	snprintf(f32, sizeof f32, "%s/f32.gguf", qdir);
	snprintf(q, sizeof q, "%s/%s.gguf", qdir, type);
	snprintf(ref, sizeof ref, "%s/ref.f32", qdir);
	snprintf(vk, sizeof vk, "%s/vk.f32", qdir);
	snprintf(cmd, sizeof cmd, "'%s/unicorn-mkmodel' --shape tiny256 --seed 3 -q -o '%s'", bin, f32);
	sh(cmd);
	snprintf(cmd, sizeof cmd, "'%s/unicorn' quantize '%s' '%s' --type %s -q", bin, f32, q, type);
	sh(cmd);
	check_inspect(bin, q, want_ft, want_types);

	char toks[E2E_TOKENS * 8];
	int k = 0;
	for (uint32_t t = 0; t < E2E_TOKENS; t++)
		k += snprintf(toks + k, sizeof toks - (size_t)k, "%s%u", t ? "," : "",
			      t ? (t * 7919u + 13) % E2E_VOCAB : 1u);
	snprintf(cmd, sizeof cmd, "'%s/unicorn' logits '%s' --engine reference --tokens %s -o '%s'", bin, q, toks,
		 ref);
	sh(cmd);
	snprintf(cmd, sizeof cmd, "'%s/unicorn' logits '%s' --tokens %s -o '%s'", bin, q, toks, vk);
	sh(cmd);

	struct golden g = {
		.n_tokens = E2E_TOKENS, .n_vocab = E2E_VOCAB, .rel_tol = 5e-3, .tie_margin = 0.02,
	};
	g.logits = read_logits(ref);
	float *ours = read_logits(vk);
	struct golden_summary s;
	bool ok = golden_check_all(&g, ours, &s);
	fprintf(stderr, "quant_e2e: --type %s: vulkan vs reference max rel %.2e (position %u), %u argmaxes compared\n",
		type, s.max_rel, s.worst_pos, s.n_argmax_checked);
	cr_expect(ok, "--type %s: %u of %d positions fail (first %u), max rel %.3e at %u", type, s.n_fail,
		  E2E_TOKENS, s.first_fail, s.max_rel, s.worst_pos);
	cr_expect_gt(s.n_argmax_checked, E2E_TOKENS / 2, "too few clear argmaxes to compare");
	free(ours);
	free(g.logits);
}

/* The presets: tiny256 has 6 layers, so use_more_bits picks layers 2 and 5
 * (Q4_K_M/Q5_K_M attn_v, ffn_down -> Q6_K); Q3_K_M gives attn_v Q5_K in layers
 * 0-1 and Q4_K after, ffn_down Q4_K (no layer below 6/16), attn_output Q4_K;
 * token_embd (the tied output, 256 wide) Q6_K; attn_output's 128-wide rows
 * fall back (Q4_K -> Q5_0, Q5_K -> Q5_1, IQ4_XS -> IQ4_NL, Q2_K -> Q4_0). */
TestSuite(quant_e2e, .init = q_init, .fini = q_fini, .timeout = 300);

Test(quant_e2e, q4_k_m) { run_e2e("q4_k_m", "Q4_K - Medium (15)", "f32,q4_K,q6_K,q5_0"); }
Test(quant_e2e, q5_k_m) { run_e2e("q5_k_m", "Q5_K - Medium (17)", "f32,q5_K,q6_K,q5_1"); }
Test(quant_e2e, q3_k_m) { run_e2e("q3_k_m", "Q3_K - Medium (12)", "f32,q3_K,q4_K,q5_K,q6_K,q5_0"); }
/* iq4_xs is llama-quantize's mix: tiny256 has 2 query heads per KV head
 * (attn_v keeps iq4_xs) and no layer below 6/8 (ffn_down keeps it); the tied
 * output takes q6_K */
Test(quant_e2e, iq4_xs) { run_e2e("iq4_xs", "IQ4_XS - 4.25 bpw (30)", "f32,iq4_xs,iq4_nl,q6_K"); }
Test(quant_e2e, q2_k) { run_e2e("q2_k", "Q2_K - Medium (10)", "f32,q2_K,q4_0"); }
Test(quant_e2e, q5_0) { run_e2e("q5_0", "Q5_0 (8)", "f32,q5_0"); }
Test(quant_e2e, q4_1) { run_e2e("q4_1", "Q4_1 (3)", "f32,q4_1"); }
Test(quant_e2e, q5_1) { run_e2e("q5_1", "Q5_1 (9)", "f32,q5_1"); }
Test(quant_e2e, q6_k) { run_e2e("q6_k", "Q6_K (18)", "f32,q6_K,q8_0"); }
