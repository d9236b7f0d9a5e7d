/* unicorn bench: llama-bench style throughput of the Vulkan engine.
 *
 * Definitions follow llama-bench: ppN processes an N-token prompt (in batches
 * of -b tokens) from an empty context; tgN generates N tokens one at a time
 * from an empty context. Each test runs once as a warm-up and then -r times;
 * tokens/s is reported as mean ± sample standard deviation over repetitions.
 * Generation computes the full logits row and picks the next token on the GPU
 * (greedy), as a real decode step does. */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "gpu_worker/engine.h"
#include "gpu_worker/vk.h"
#include "gpu_worker/vk_bw.h"
#include "common/err.h"
#include "formats/model.h"
#include "formats/quant.h"

#define BENCH_MAX_TESTS 16

static void bench_usage(FILE *f)
{
	fprintf(f,
		"usage: unicorn bench MODEL [-p N[,N..]] [-n N[,N..]] [-d N[,N..]] [-r N] [-b N] [--parallel B[,B..]]\n"
		"                     [--kv-type T] [--vk-device D] [--json] [--profile]\n"
		"\n"
		"Measures the Vulkan engine like llama-bench: ppN = prompt processing of N tokens,\n"
		"tgN = generation of N tokens one at a time, each from an empty context, or after\n"
		"-d tokens of context (\"tg128 @ d8192\").\n"
		"\n"
		"  -p, --n-prompt N     prompt lengths to test (default 512; 0 skips)\n"
		"  -n, --n-gen N        generation lengths to test (default 128; 0 skips)\n"
		"  -d, --n-depth N      context depths: each test runs after N tokens already in\n"
		"                       the KV cache (prefilled, not timed; default 0)\n"
		"  -r, --repetitions N  timed repetitions per test after one warm-up (default 5)\n"
		"  -b, --batch-size N   tokens per prompt-processing submission (default 512, lowered\n"
		"                       with a note to what the device holds: the batch's logits must\n"
		"                       fit its maxStorageBufferRange, 128 rows of a 262,144-token\n"
		"                       vocabulary on lavapipe)\n"
		"      --parallel B     decode with B sequences together (like llama-batched-bench): each of\n"
		"                       B sequences generates the first -n length of tokens from an empty\n"
		"                       context, one step of B rows at a time; reports the aggregate tok/s\n"
		"                       and ms per step (pdB), on the kernels a lone token uses (narrow)\n"
		"                       and, where the device has them, the mat-mat kernels (wide: what\n"
		"                       the coordinator runs from 8 rows); without -p, only this\n"
		"      --kv-type T      the KV cache's type: f16 (default), q8_0 or f32\n"
		"      --vk-device D    Vulkan device index or name substring (see 'unicorn devices')\n"
		"      --json           one JSON object on stdout instead of a table\n"
		"      --profile        afterwards, GPU time per dispatch kind of one decode step and one\n"
		"                       prefill chunk (to stderr, or in the JSON), with matrix GB/s; with\n"
		"                       --parallel also one step of the largest B, narrow and wide\n");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_u32(const char *s, uint32_t max, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max || s[0] == '-')
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* "128" or "128,256" -> list (0 entries skipped). */
static int parse_list(const char *s, uint32_t *vals, int *n)
{
	char buf[256];
	if (strlen(s) >= sizeof buf)
		return -1;
	strcpy(buf, s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint32_t v;
		if (parse_u32(t, 1u << 20, &v))
			return -1;
		if (v == 0)
			continue;
		if (*n >= BENCH_MAX_TESTS)
			return -1;
		vals[(*n)++] = v;
	}
	return 0;
}

/* An empty cache, then depth tokens of context in chunks of batch (not timed). */
static int fill_depth(struct engine *e, const uint32_t *tokens, uint32_t depth, uint32_t batch)
{
	int rc = engine_reset(e);
	uint32_t next;
	for (uint32_t pos = 0; pos < depth && !rc; pos += batch)
		rc = engine_argmax(e, tokens + pos, depth - pos < batch ? depth - pos : batch, pos, &next);
	return rc;
}

/* One timed run of a test after depth tokens of context; returns seconds or
 * a negative error code. tokens holds depth + n. */
static int run_pp(struct engine *e, const uint32_t *tokens, uint32_t depth, uint32_t n, uint32_t batch, double *secs)
{
	int rc = fill_depth(e, tokens, depth, batch);
	if (rc)
		return rc;
	double t0 = now_s();
	uint32_t next;
	for (uint32_t pos = depth; pos < depth + n; pos += batch) {
		uint32_t m = depth + n - pos < batch ? depth + n - pos : batch;
		rc = engine_argmax(e, tokens + pos, m, pos, &next);
		if (rc)
			return rc;
	}
	*secs = now_s() - t0;
	return 0;
}

static int run_tg(struct engine *e, const uint32_t *tokens, uint32_t depth, uint32_t n, uint32_t batch, double *secs)
{
	int rc = fill_depth(e, tokens, depth, batch);
	if (rc)
		return rc;
	uint32_t tok = tokens[depth];
	double t0 = now_s();
	for (uint32_t pos = depth; pos < depth + n; pos++) {
		rc = engine_argmax(e, &tok, 1, pos, &tok);
		if (rc)
			return rc;
	}
	*secs = now_s() - t0;
	return 0;
}

/* B sequences decoding together: n steps of B rows (row b: sequence b at
 * the step's position), each row's next token its own argmax. */
static int run_pd(struct engine *e, const uint32_t *first, uint32_t B, uint32_t n, bool wide, double *secs)
{
	uint32_t tok[256], seq[256], pos[256];
	struct engine_chunk ch[256];
	if (B > 256)
		return err_set(ERR_INVAL, "bench: --parallel %u: at most 256 sequences", B);
	int rc = engine_reset(e);
	if (rc)
		return rc;
	for (uint32_t b = 0; b < B; b++) {
		tok[b] = first[b];
		seq[b] = b;
	}
	double t0 = now_s();
	for (uint32_t step = 0; step < n && !rc; step++) {
		for (uint32_t b = 0; b < B; b++) {
			pos[b] = step;
			ch[b] = (struct engine_chunk){ b, step, 1, &tok[b], true };
		}
		/* the outputs land in tok[] after the step has read it */
		rc = wide ? engine_forward_chunks(e, B, ch, true, ENGINE_BATCH_ARGMAX, 1, tok, NULL)
			  : engine_forward_batch(e, B, tok, seq, pos, ENGINE_BATCH_ARGMAX, 1, tok, NULL);
	}
	*secs = now_s() - t0;
	return rc;
}

/* One profiled forward; printed to f as a table and/or added to the JSON array. */
/* What profile_one runs: n tokens of one sequence, or one token of each of n
 * sequences on the narrow or the wide kernels. */
enum prof_kind { PROF_ONE, PROF_NARROW, PROF_WIDE };

static int profile_one(struct engine *e, const char *what, enum prof_kind kind, const uint32_t *tokens, uint32_t n,
		       uint32_t pos0, double copy_gbs, FILE *f, json_t *arr)
{
	struct engine_prof pr;
	int rc;
	if (kind != PROF_ONE) { /* n sequences, one token each at pos0 */
		uint32_t seq[256], pos[256];
		for (uint32_t b = 0; b < n && b < 256; b++) {
			seq[b] = b;
			pos[b] = pos0;
		}
		rc = n > 256 ? ERR_INVAL : engine_profile_batch(e, n, tokens, seq, pos, kind == PROF_WIDE, &pr);
	} else {
		rc = engine_profile(e, tokens, n, pos0, &pr);
	}
	if (rc)
		return rc;
	uint64_t mat_ns = 0, mat_bytes = 0;
	if (f) {
		fprintf(f, "\nprofile: %s (%u token%s at position %u): %u dispatches, %u barriers, GPU %.3f ms\n", what, n,
			n == 1 ? "" : "s", pos0, pr.n_dispatch, pr.n_barrier, pr.total_ns / 1e6);
		fprintf(f, "  %-18s %6s %10s %6s %10s %7s\n", "kind", "count", "ms", "%", "weight GB/s", "% copy");
	}
	json_t *kinds = json_array();
	for (uint32_t i = 0; i < pr.n_kind; i++) {
		const struct engine_prof_kind *k = &pr.kind[i];
		double gbs = k->ns ? (double)k->bytes / (double)k->ns : 0;
		if (k->bytes) {
			mat_ns += k->ns;
			mat_bytes += k->bytes;
		}
		if (f) {
			fprintf(f, "  %-18s %6u %10.3f %6.1f", k->name, k->count, k->ns / 1e6,
				pr.total_ns ? 100.0 * k->ns / pr.total_ns : 0.0);
			if (k->bytes)
				fprintf(f, " %10.1f %7.1f", gbs, copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 0.0);
			fputc('\n', f);
		}
		json_t *o = json_object();
		json_object_set_new(o, "kind", json_string(k->name));
		json_object_set_new(o, "count", json_integer(k->count));
		json_object_set_new(o, "ns", json_integer((json_int_t)k->ns));
		json_object_set_new(o, "weight_bytes", json_integer((json_int_t)k->bytes));
		if (k->bytes && copy_gbs > 0)
			json_object_set_new(o, "copy_frac", json_real((double)k->bytes / (double)k->ns / copy_gbs));
		json_array_append_new(kinds, o);
	}
	if (f && mat_ns)
		fprintf(f, "  matrices: %.3f ms for %.1f MB of weights = %.1f GB/s (%.1f%% of copy)\n", mat_ns / 1e6,
			mat_bytes / 1e6, (double)mat_bytes / mat_ns,
			copy_gbs > 0 ? 100.0 * (double)mat_bytes / mat_ns / copy_gbs : 0.0);
	if (arr) {
		json_t *o = json_object();
		json_object_set_new(o, "what", json_string(what));
		json_object_set_new(o, "n_tokens", json_integer(n));
		json_object_set_new(o, "pos0", json_integer(pos0));
		json_object_set_new(o, "n_dispatch", json_integer(pr.n_dispatch));
		json_object_set_new(o, "n_barrier", json_integer(pr.n_barrier));
		json_object_set_new(o, "gpu_ns", json_integer((json_int_t)pr.total_ns));
		json_object_set_new(o, "matrix_ns", json_integer((json_int_t)mat_ns));
		json_object_set_new(o, "matrix_bytes", json_integer((json_int_t)mat_bytes));
		json_object_set_new(o, "kinds", kinds);
		json_array_append_new(arr, o);
	} else {
		json_decref(kinds);
	}
	return 0;
}

/* The CPU side of the token path: wall time of replayed decode steps against the
 * GPU time their own timestamps measured (submit + fence wait overhead). */
static int profile_token_path(struct engine *e, uint32_t first, uint32_t n, FILE *f, json_t *root)
{
	int rc = engine_reset(e);
	uint32_t tok = first;
	double wall = 0, gpu = 0;
	for (uint32_t pos = 0; pos < n && !rc; pos++) {
		double t0 = now_s();
		rc = engine_argmax(e, &tok, 1, pos, &tok);
		wall += now_s() - t0;
		struct engine_timing t;
		if (!rc && engine_timing(e, &t) == 0)
			gpu += t.total_ns * 1e-9;
	}
	if (rc)
		return rc;
	if (f)
		fprintf(f, "\ntoken path: %u decode steps, wall %.1f us/token, GPU (first to last timestamp) %.1f us/token, "
			   "CPU+submit overhead %.1f us/token\n", n, 1e6 * wall / n, 1e6 * gpu / n, 1e6 * (wall - gpu) / n);
	if (root) {
		json_object_set_new(root, "token_wall_us", json_real(1e6 * wall / n));
		json_object_set_new(root, "token_gpu_us", json_real(1e6 * gpu / n));
	}
	return 0;
}

struct bench_result {
	char name[32];
	uint32_t n_prompt, n_gen, n_depth;
	uint32_t n_parallel;   /* pdB: B sequences; tok/s counts all of them */
	const char *kernel;    /* pdB: "narrow" or "wide" */
	double mean, sd;       /* tokens/s */
	double samples[64];
	uint32_t n_samples;
};

static void stats(struct bench_result *r)
{
	double s = 0, ss = 0;
	for (uint32_t i = 0; i < r->n_samples; i++)
		s += r->samples[i];
	r->mean = s / r->n_samples;
	for (uint32_t i = 0; i < r->n_samples; i++)
		ss += (r->samples[i] - r->mean) * (r->samples[i] - r->mean);
	r->sd = r->n_samples > 1 ? sqrt(ss / (r->n_samples - 1)) : 0;
}

/* Weight bytes and parameter count, and the dominant matrix type's name. */
static void model_summary(const struct model *m, uint64_t *bytes, uint64_t *params, const char **type)
{
	uint64_t by_type[64] = { 0 };
	*bytes = *params = 0;
	for (size_t i = 0; i < m->n_tensors; i++) {
		*bytes += m->tensors[i].nbytes;
		*params += model_tensor_nelems(&m->tensors[i]);
		if (m->tensors[i].type < 64)
			by_type[m->tensors[i].type] += m->tensors[i].nbytes;
	}
	uint32_t best = 0;
	for (uint32_t t = 0; t < 64; t++)
		if (by_type[t] > by_type[best])
			best = t;
	const struct quant_type_info *ti = quant_type_info(best);
	*type = ti ? ti->name : "?";
}

int cli_bench(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "n-prompt", required_argument, 0, 'p' }, { "n-gen", required_argument, 0, 'n' },
		{ "repetitions", required_argument, 0, 'r' }, { "batch-size", required_argument, 0, 'b' },
		{ "vk-device", required_argument, 0, 'v' }, { "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' }, { "profile", no_argument, 0, 'P' },
		{ "parallel", required_argument, 0, 'B' },
		{ "n-depth", required_argument, 0, 'D' }, { "kv-type", required_argument, 0, 'K' }, { 0, 0, 0, 0 },
	};
	uint32_t pp[BENCH_MAX_TESTS], tg[BENCH_MAX_TESTS], pd[BENCH_MAX_TESTS], dp[BENCH_MAX_TESTS] = { 0 }, reps = 5,
		 batch = 512, kv_type = 0;
	int n_pp = 0, n_tg = 0, n_pd = 0, n_dp = 1, json = 0, pp_set = 0, tg_set = 0, profile = 0;
	const char *device = NULL;
	int c, b_set = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "p:n:d:r:b:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pp_set = 1;
			if (parse_list(optarg, pp, &n_pp))
				goto bad_value;
			break;
		case 'n':
			tg_set = 1;
			if (parse_list(optarg, tg, &n_tg))
				goto bad_value;
			break;
		case 'r':
			if (parse_u32(optarg, 64, &reps) || reps == 0)
				goto bad_value;
			break;
		case 'b':
			b_set = 1;
			if (parse_u32(optarg, 1u << 16, &batch) || batch == 0)
				goto bad_value;
			break;
		case 'B':
			if (parse_list(optarg, pd, &n_pd))
				goto bad_value;
			for (int i = 0; i < n_pd; i++)
				if (pd[i] > 256) {
					fprintf(stderr, "unicorn bench: --parallel %u: at most 256 sequences\n", pd[i]);
					return 2;
				}
			break;
		case 'd':
		case 'D':
			n_dp = 0;
			if (parse_list(optarg, dp, &n_dp) || (n_dp == 0 && strspn(optarg, "0,") != strlen(optarg)))
				goto bad_value;
			if (strspn(optarg, "0") == 1 || strstr(optarg, ",0") || !strncmp(optarg, "0,", 2)) {
				/* depth 0 is a test of its own (parse_list skips zeros) */
				if (n_dp >= BENCH_MAX_TESTS)
					goto bad_value;
				memmove(dp + 1, dp, n_dp * sizeof *dp);
				dp[0] = 0;
				n_dp++;
			}
			break;
		case 'K':
			if (kv_type_parse(optarg, &kv_type)) {
				fprintf(stderr, "unicorn bench: --kv-type: %s\n", err_msg());
				return 2;
			}
			break;
		case 'v': device = optarg; break;
		case 'j': json = 1; break;
		case 'P': profile = 1; break;
		case 'h': bench_usage(stdout); return 0;
		default: bench_usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		bench_usage(stderr);
		return 2;
	}
	if (0) {
bad_value:
		fprintf(stderr, "unicorn bench: bad value '%s' for -%c\n", optarg, c);
		return 2;
	}
	/* --parallel alone measures only the parallel decode */
	if (!pp_set && !n_pd)
		pp[n_pp++] = 512;
	if (!tg_set)
		tg[n_tg++] = 128;
	uint32_t pd_max = 0;
	for (int i = 0; i < n_pd; i++)
		pd_max = pd[i] > pd_max ? pd[i] : pd_max;
	uint32_t pd_gen = n_tg ? tg[0] : 128;
	if (n_pd && !pp_set)
		n_tg = 0; /* --parallel without -p: only the parallel decode, -n its length */
	const char *path = argv[optind];

	struct model *m = NULL;
	struct engine *e = NULL;
	int rc = model_open(path, &m);
	if (rc) {
		fprintf(stderr, "unicorn bench: %s\n", err_msg());
		return 1;
	}
	uint32_t max_len = 1;
	for (int i = 0; i < n_pp; i++)
		max_len = pp[i] > max_len ? pp[i] : max_len;
	for (int i = 0; i < n_tg; i++)
		max_len = tg[i] > max_len ? tg[i] : max_len;
	if (n_pd && pd_gen > max_len)
		max_len = pd_gen;
	if (max_len < pd_max)
		max_len = pd_max; /* first tokens of the parallel sequences */
	uint32_t max_dp = 0;
	for (int i = 0; i < n_dp; i++)
		max_dp = dp[i] > max_dp ? dp[i] : max_dp;
	if ((uint64_t)max_len + max_dp > m->cfg.n_ctx || (uint64_t)max_len + max_dp > KV_MAX_CTX) {
		fprintf(stderr, "unicorn bench: %u tokens after a depth of %u exceed the model's context of %u\n", max_len,
			max_dp, m->cfg.n_ctx < KV_MAX_CTX ? m->cfg.n_ctx : KV_MAX_CTX);
		model_close(m);
		return 2;
	}
	/* the engine needs no batch larger than the longest prompt */
	uint32_t eng_batch = batch, max_pp = 0;
	for (int i = 0; i < n_pp; i++)
		max_pp = pp[i] > max_pp ? pp[i] : max_pp;
	if (max_pp && max_pp < eng_batch)
		eng_batch = max_pp;
	/* The engine's logits buffer holds a row per batch token and must fit
	 * one storage-buffer binding: 512 rows of a 262,144-token vocabulary
	 * are 512 MiB, over lavapipe's maxStorageBufferRange of 128 MiB. The
	 * default batch is clamped to what fits (with a note); an explicit -b
	 * that does not fit is an error. */
	struct vk_ctx *vkp = NULL;
	if (vk_create(device, &vkp) == 0) {
		uint64_t range = vkp->props.limits.maxStorageBufferRange, row = (uint64_t)m->cfg.n_vocab * 4;
		uint64_t fit = row ? range / row : batch;
		vk_destroy(vkp);
		if (fit == 0) {
			fprintf(stderr, "unicorn bench: one row of logits (%llu bytes) exceeds the device's maxStorageBufferRange (%llu)\n",
				(unsigned long long)row, (unsigned long long)range);
			model_close(m);
			return 1;
		}
		if (eng_batch > fit && b_set) {
			fprintf(stderr,
				"unicorn bench: -b %u: the batch's logits (%llu bytes) exceed the device's maxStorageBufferRange "
				"(%llu); use -b %llu or less\n",
				eng_batch, (unsigned long long)(eng_batch * row), (unsigned long long)range, (unsigned long long)fit);
			model_close(m);
			return 2;
		}
		if (eng_batch > fit) {
			fprintf(stderr,
				"unicorn bench: note: batch size %u -> %llu: the batch's logits (%llu bytes) would exceed the "
				"device's maxStorageBufferRange (%llu)\n",
				eng_batch, (unsigned long long)fit, (unsigned long long)(eng_batch * row), (unsigned long long)range);
			batch = eng_batch = (uint32_t)fit;
		}
	}
	if (max_dp && eng_batch < batch)
		eng_batch = batch; /* the depth fills in chunks of the batch */
	max_len += max_dp;
	struct engine_opts eo = { .device = device, .max_ctx = max_len, .max_batch = eng_batch > pd_max ? eng_batch : pd_max,
				  .max_seqs = pd_max ? pd_max : 1, .kv_type = kv_type };
	fprintf(stderr, "unicorn bench: loading %s onto the GPU...\n", path);
	rc = engine_create(m, &eo, &e);
	if (rc) {
		fprintf(stderr, "unicorn bench: %s\n", err_msg());
		model_close(m);
		return 1;
	}
	struct vk_ctx *vk = engine_vk(e);
	/* --profile: the device's copy bandwidth, the yardstick of each kernel's weight GB/s */
	double copy_gbs = 0;
	uint64_t copy_bytes = 0;
	if (profile && vk_copy_bw(vk, &copy_bytes, &copy_gbs) == 0)
		fprintf(stderr, "unicorn bench: copy bandwidth %.1f GB/s (read + write, %.0f MiB buffers)\n", copy_gbs,
			copy_bytes / 1048576.0);
	else if (profile)
		fprintf(stderr, "unicorn bench: copy bandwidth: %s\n", err_msg());

	/* Random (seeded) prompt tokens below the text vocabulary, as llama-bench uses random tokens. */
	uint32_t *tokens = malloc(sizeof *tokens * max_len);
	uint64_t st = 0x9e3779b97f4a7c15ull;
	for (uint32_t i = 0; i < max_len && tokens; i++) {
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		tokens[i] = (uint32_t)((st >> 33) % m->cfg.n_vocab_text);
	}
	static struct bench_result res[2 * BENCH_MAX_TESTS * BENCH_MAX_TESTS + 2 * BENCH_MAX_TESTS];
	int n_res = 0;
	rc = tokens ? 0 : ERR_NOMEM;
	for (int kind = 0; kind < 2 && !rc; kind++) {
		int nt = kind == 0 ? n_pp : n_tg;
		for (int i = 0; i < nt * n_dp && !rc; i++) {
			struct bench_result *r = &res[n_res++];
			memset(r, 0, sizeof *r);
			uint32_t n = kind == 0 ? pp[i / n_dp] : tg[i / n_dp], d = dp[i % n_dp];
			if (d)
				snprintf(r->name, sizeof r->name, "%s%u @ d%u", kind == 0 ? "pp" : "tg", n, d);
			else
				snprintf(r->name, sizeof r->name, "%s%u", kind == 0 ? "pp" : "tg", n);
			r->n_prompt = kind == 0 ? n : 0;
			r->n_gen = kind == 1 ? n : 0;
			r->n_depth = d;
			for (uint32_t rep = 0; rep <= reps && !rc; rep++) { /* rep 0: warm-up */
				double secs = 0;
				rc = kind == 0 ? run_pp(e, tokens, d, n, batch, &secs) : run_tg(e, tokens, d, n, batch, &secs);
				if (!rc && rep > 0)
					r->samples[r->n_samples++] = n / secs;
				fprintf(stderr, "\r  %-8s %s %u/%u", r->name, rep ? "run" : "warm-up", rep, reps);
			}
			fprintf(stderr, "\n");
			if (!rc)
				stats(r);
		}
	}
	for (int i = 0; i < n_pd && !rc; i++) {
		for (int wide = 0; wide < 2 && !rc; wide++) {
			if (wide && !engine_has_mm(e))
				continue;
			struct bench_result *r = &res[n_res++];
			memset(r, 0, sizeof *r);
			snprintf(r->name, sizeof r->name, "pd%u", pd[i]);
			r->n_gen = pd_gen;
			r->n_parallel = pd[i];
			r->kernel = wide ? "wide" : "narrow";
			for (uint32_t rep = 0; rep <= reps && !rc; rep++) {
				double secs = 0;
				rc = run_pd(e, tokens, pd[i], pd_gen, wide, &secs);
				if (!rc && rep > 0)
					r->samples[r->n_samples++] = (double)pd[i] * pd_gen / secs;
				fprintf(stderr, "\r  %-8s %-6s %s %u/%u", r->name, r->kernel, rep ? "run" : "warm-up", rep, reps);
			}
			fprintf(stderr, "\n");
			if (!rc)
				stats(r);
		}
	}
	if (rc) {
		fprintf(stderr, "unicorn bench: %s\n", err_msg());
		goto out;
	}

	/* profiles: a decode step in the middle of a tgN-like context, and one prefill chunk */
	json_t *prof_arr = profile && json ? json_array() : NULL, *prof_root = profile && json ? json_object() : NULL;
	if (profile) {
		FILE *pf = json ? NULL : stderr;
		if (prof_root && copy_gbs > 0)
			json_object_set_new(prof_root, "copy_gbs", json_real(copy_gbs));
		uint32_t np = n_pp ? (pp[0] < batch ? pp[0] : batch) : 0;
		uint32_t dpos = n_tg ? max_dp + tg[0] / 2 : 0; /* at the deepest -d */
		rc = engine_reset(e);
		if (!rc && np)
			rc = profile_one(e, "prefill chunk", PROF_ONE, tokens, np, max_dp, copy_gbs, pf, prof_arr);
		if (!rc && np)
			rc = profile_one(e, "prefill chunk", PROF_ONE, tokens, np, max_dp, copy_gbs, pf, prof_arr); /* second: warm */
		if (!rc && n_tg)
			rc = profile_one(e, "decode step", PROF_ONE, tokens, 1, dpos, copy_gbs, pf, prof_arr);
		if (!rc && n_tg)
			rc = profile_one(e, "decode step", PROF_ONE, tokens, 1, dpos, copy_gbs, pf, prof_arr);
		if (!rc && n_tg)
			rc = profile_token_path(e, tokens[0], tg[0], pf, prof_root);
		/* parallel: the largest B at the middle of its generation, twice each (the first warms) */
		for (int k = 0; !rc && n_pd && k < 4; k++) {
			if (k >= 2 && !engine_has_mm(e))
				break;
			rc = engine_reset(e);
			if (!rc)
				rc = profile_one(e, k < 2 ? "parallel step, narrow" : "parallel step, wide",
						 k < 2 ? PROF_NARROW : PROF_WIDE, tokens, pd_max, pd_gen / 2, copy_gbs, pf, prof_arr);
		}
		if (!rc && pf)
			fprintf(pf, "kernels: %s\n", engine_kernels(e));
		if (rc) {
			fprintf(stderr, "unicorn bench: profile: %s\n", err_msg());
			json_decref(prof_arr);
			json_decref(prof_root);
			goto out;
		}
	}

	uint64_t bytes, params;
	const char *type;
	model_summary(m, &bytes, &params, &type);
	if (json) {
		json_t *o = json_object(), *arr = json_array();
		json_object_set_new(o, "model", json_string(path));
		json_object_set_new(o, "model_type", json_string(type));
		json_object_set_new(o, "model_size", json_integer((json_int_t)bytes));
		json_object_set_new(o, "model_n_params", json_integer((json_int_t)params));
		json_object_set_new(o, "n_layer", json_integer(m->cfg.n_layer));
		json_object_set_new(o, "n_embd", json_integer(m->cfg.n_embd));
		json_object_set_new(o, "n_vocab", json_integer(m->cfg.n_vocab));
		json_object_set_new(o, "gpu", json_string(vk->info.name));
		json_object_set_new(o, "driver", json_string(vk->info.driver));
		json_object_set_new(o, "n_batch", json_integer(batch));
		json_object_set_new(o, "kv_type", json_string(kv_type_name(kv_type)));
		json_object_set_new(o, "repetitions", json_integer(reps));
		for (int i = 0; i < n_res; i++) {
			json_t *t = json_object(), *s = json_array();
			json_object_set_new(t, "test", json_string(res[i].name));
			json_object_set_new(t, "n_prompt", json_integer(res[i].n_prompt));
			json_object_set_new(t, "n_gen", json_integer(res[i].n_gen));
			json_object_set_new(t, "n_depth", json_integer(res[i].n_depth));
			if (res[i].n_parallel) {
				json_object_set_new(t, "n_parallel", json_integer(res[i].n_parallel));
				json_object_set_new(t, "kernel", json_string(res[i].kernel));
				json_object_set_new(t, "ms_per_step", json_real(1e3 * res[i].n_parallel / res[i].mean));
			}
			json_object_set_new(t, "avg_ts", json_real(res[i].mean));
			json_object_set_new(t, "stddev_ts", json_real(res[i].sd));
			for (uint32_t k = 0; k < res[i].n_samples; k++)
				json_array_append_new(s, json_real(res[i].samples[k]));
			json_object_set_new(t, "samples_ts", s);
			json_array_append_new(arr, t);
		}
		json_object_set_new(o, "tests", arr);
		json_object_set_new(o, "kernels", json_string(engine_kernels(e)));
		if (prof_root) {
			json_object_set_new(prof_root, "runs", prof_arr);
			json_object_set_new(o, "profile", prof_root);
		}
		char *txt = json_dumps(o, JSON_INDENT(2));
		if (txt)
			puts(txt);
		free(txt);
		json_decref(o);
	} else {
		printf("| model | size | params | backend | device | test | t/s |\n");
		printf("| --- | ---: | ---: | --- | --- | ---: | ---: |\n");
		for (int i = 0; i < n_res; i++) {
			char name[64];
			if (res[i].n_parallel)
				snprintf(name, sizeof name, "%.31s %.7s (%.2f ms/step)", res[i].name, res[i].kernel,
					 1e3 * res[i].n_parallel / res[i].mean);
			else
				snprintf(name, sizeof name, "%.31s", res[i].name);
			printf("| gemma3 %uL %s | %.2f MiB | %.2f B | Vulkan | %s | %s | %.2f ± %.2f |\n",
			       m->cfg.n_layer, type, bytes / 1048576.0, params / 1e9, vk->info.name,
			       name, res[i].mean, res[i].sd);
		}
	}
out:
	free(tokens);
	engine_destroy(e);
	model_close(m);
	return rc ? 1 : 0;
}
