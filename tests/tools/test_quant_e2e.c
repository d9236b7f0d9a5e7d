/* End to end, one whole mixed-type model per --type: unicorn-mkmodel writes
 * an f32 "tiny256" model (hidden 256, ffn 512: K-quant and IQ4_XS blocks fit
 * every matrix but attn_output, whose 128-wide rows take the fall-back),
 * `unicorn quantize --type T` converts it, `unicorn inspect` must show the
 * preset's file type and tensor types, and `unicorn logits` on the Vulkan
 * engine (lavapipe under `make test`) must match `unicorn logits --engine
 * reference` (the CPU reference on the file's own dequantized weights) within
 * the golden tolerances for quantized weights (golden/README.md): relative L2
 * <= 5e-3 per position and equal argmax wherever the reference's top-1 leads
 * by >= 0.02. Needs the built binaries (UNICORN_BIN). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tests/golden.h"

#define E2E_TOKENS 40   /* crosses `unicorn logits`' 32-row chunks and the sliding window (8) */
#define E2E_VOCAB 32000 /* tiny256 keeps tiny's Llama vocabulary */

static char edir[64];

static void e2e_init(void)
{
	snprintf(edir, sizeof edir, "/tmp/unicorn-test-qe2e-XXXXXX");
	cr_assert_not_null(mkdtemp(edir));
}

static void e2e_fini(void)
{
	DIR *d = opendir(edir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[400];
		snprintf(p, sizeof p, "%s/%s", edir, e->d_name);
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(edir);
}

/* Run cmd with stderr to a log in the test's directory; on failure the
 * assertion shows the log's start. */
static void sh(const char *cmd)
{
	char full[8192], log[128], msg[600] = "";
	snprintf(log, sizeof log, "%s/stderr.log", edir);
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
	char cmd[4096], f32[128], q[128], ref[128], vk[128];
	snprintf(f32, sizeof f32, "%s/f32.gguf", edir);
	snprintf(q, sizeof q, "%s/%s.gguf", edir, type);
	snprintf(ref, sizeof ref, "%s/ref.f32", edir);
	snprintf(vk, sizeof vk, "%s/vk.f32", edir);
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
TestSuite(quant_e2e, .init = e2e_init, .fini = e2e_fini, .timeout = 300);

Test(quant_e2e, q4_k_m) { run_e2e("q4_k_m", "Q4_K - Medium (15)", "f32,q4_K,q6_K,q5_0"); }
Test(quant_e2e, q5_k_m) { run_e2e("q5_k_m", "Q5_K - Medium (17)", "f32,q5_K,q6_K,q5_1"); }
Test(quant_e2e, q3_k_m) { run_e2e("q3_k_m", "Q3_K - Medium (12)", "f32,q3_K,q4_K,q5_K,q6_K,q5_0"); }
Test(quant_e2e, iq4_xs) { run_e2e("iq4_xs", "IQ4_XS - 4.25 bpw (30)", "f32,iq4_xs,iq4_nl"); }
Test(quant_e2e, q2_k) { run_e2e("q2_k", "Q2_K - Medium (10)", "f32,q2_K,q4_0"); }
Test(quant_e2e, q5_0) { run_e2e("q5_0", "Q5_0 (8)", "f32,q5_0"); }
Test(quant_e2e, q4_1) { run_e2e("q4_1", "Q4_1 (3)", "f32,q4_1"); }
Test(quant_e2e, q5_1) { run_e2e("q5_1", "Q5_1 (9)", "f32,q5_1"); }
Test(quant_e2e, q6_k) { run_e2e("q6_k", "Q6_K (18)", "f32,q6_K,q8_0"); }
