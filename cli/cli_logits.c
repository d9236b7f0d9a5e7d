/* unicorn logits: run a token sequence teacher-forced through an engine and
 * write its logits as float32 little-endian [T][n_vocab], row t being the
 * logits after tokens 0..t (the layout of the golden .logits.f32 files). */
#include "cli/cli.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_worker/engine.h"
#include "common/err.h"
#include "formats/model.h"
#include "ref/ref.h"

/* An engine as this command needs it: one sequence, run in chunks. forward
 * runs tokens[0..n) at positions pos0.. (earlier positions already run) and
 * writes all n rows of logits [n][n_vocab] (gpu_worker/engine.h's
 * engine_forward(..., all_rows = true) has this shape). */
struct logits_engine {
	const char *name;
	int (*create)(const struct model *m, uint32_t max_ctx, void **state);
	int (*forward)(void *state, const uint32_t *tokens, uint32_t n, uint32_t pos0, float *logits);
	void (*destroy)(void *state);
};

/* Rows of logits per forward call: bounds memory (n_vocab 262144 -> 32 MiB). */
#define LOGITS_CHUNK 32

static int reference_create(const struct model *m, uint32_t max_ctx, void **state)
{
	struct ref_model *r;
	int rc = ref_create(m, max_ctx, &r);
	*state = rc < 0 ? NULL : r;
	return rc;
}

/* --kv-type (both engines: the reference rounds its cache alike) and the
 * first row --last keeps (the reference skips the head before it). */
static uint32_t kv_type = KV_TYPE_F16;
static size_t first_row;

static int reference_forward(void *state, const uint32_t *tokens, uint32_t n, uint32_t pos0, float *logits)
{
	struct ref_model *r = state;
	r->kv_type = kv_type;
	for (uint32_t i = 0; i < n; i++) {
		bool want = pos0 + i >= first_row;
		int rc = ref_forward(r, tokens[i], pos0 + i, want ? logits + (size_t)i * r->cfg.n_vocab : NULL);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void reference_destroy(void *state)
{
	ref_destroy(state);
}

/* --vk-device, read by vulkan_create (the engine interface has no options),
 * and the model's vocabulary for vulkan_decode_forward's rows. */
static const char *vk_device;
static uint32_t vk_n_vocab;

static int vulkan_create(const struct model *m, uint32_t max_ctx, void **state)
{
	struct engine_opts o = { .device = vk_device, .max_ctx = max_ctx, .max_batch = LOGITS_CHUNK, .kv_type = kv_type };
	struct engine *e = NULL;
	vk_n_vocab = m->cfg.n_vocab;
	int rc = engine_create(m, &o, &e);
	*state = e;
	return rc;
}

static int vulkan_forward(void *state, const uint32_t *tokens, uint32_t n, uint32_t pos0, float *logits)
{
	return engine_forward(state, tokens, n, pos0, logits, true);
}

/* One token per call: the decode kernels (mul_mvs, attention of one row)
 * instead of the prefill ones, e.g. to check them against the goldens. */
static int vulkan_decode_forward(void *state, const uint32_t *tokens, uint32_t n, uint32_t pos0, float *logits)
{
	for (uint32_t i = 0; i < n; i++) {
		int rc = engine_forward(state, tokens + i, 1, pos0 + i, logits + (size_t)i * vk_n_vocab, true);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void vulkan_destroy(void *state)
{
	engine_destroy(state);
}

static const struct logits_engine engines[] = {
	{ "vulkan", vulkan_create, vulkan_forward, vulkan_destroy },
	{ "vulkan-decode", vulkan_create, vulkan_decode_forward, vulkan_destroy },
	{ "reference", reference_create, reference_forward, reference_destroy },
};
#define DEFAULT_ENGINE "vulkan"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: unicorn logits MODEL (--tokens IDS | --tokens-file FILE) -o FILE [--engine NAME]\n"
		"                     [--last N] [--kv-type f16|q8_0|f32]\n"
		"\n"
		"Run the token ids teacher-forced from position 0 and write the logits as\n"
		"float32 little-endian [T][n_vocab]; row t holds the logits after tokens 0..t.\n"
		"\n"
		"  MODEL               GGUF file or Hugging Face model directory\n"
		"  --tokens IDS        comma-separated token ids, e.g. 2,1018,7\n"
		"  --tokens-file FILE  token ids separated by commas or whitespace\n"
		"  -o, --output FILE   where to write the logits ('-' for stdout)\n"
		"  --engine NAME       vulkan (default: prompt chunks, the prefill kernels),\n"
		"                      vulkan-decode (one token per step, the decode kernels)\n"
		"                      or reference (the CPU reference, slow)\n"
		"  --last N            write only the last N rows [N][n_vocab] (a long sequence's full\n"
		"                      logits are gigabytes)\n"
		"  --kv-type T         the KV cache's type: f16 (default), q8_0 or f32; the reference\n"
		"                      rounds its cache the same way (f32: exact)\n"
		"  --vk-device D       Vulkan device index or name substring (see 'unicorn devices')\n"
		"  -h, --help          show this help\n");
}

/* Append the ids in text (separated by commas and/or whitespace) to *ids. */
static int parse_ids(const char *text, const char *what, uint32_t **ids, size_t *n, size_t *cap)
{
	const char *p = text;
	for (;;) {
		while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (!*p)
			return 0;
		if (*p < '0' || *p > '9')
			return err_set(ERR_INVAL, "%s: token %zu: '%.20s' is not a non-negative integer",
				       what, *n, p);
		char *end;
		errno = 0;
		unsigned long long v = strtoull(p, &end, 10);
		if (errno || v > UINT32_MAX)
			return err_set(ERR_RANGE, "%s: token %zu: '%.20s' out of range", what, *n, p);
		if (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r')
			return err_set(ERR_INVAL, "%s: token %zu: '%.20s' is not a non-negative integer",
				       what, *n, p);
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 64;
			if (nc > SIZE_MAX / sizeof **ids)
				return err_set(ERR_RANGE, "%s: too many tokens", what);
			uint32_t *t = realloc(*ids, nc * sizeof **ids);
			if (!t)
				return err_set(ERR_NOMEM, "%s: out of memory", what);
			*ids = t;
			*cap = nc;
		}
		(*ids)[(*n)++] = (uint32_t)v;
		p = end;
	}
}

static int read_text_file(const char *path, char **out)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return err_set(ERR_IO, "%s: %s", path, strerror(errno));
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int rc = 0;
	if (!buf) {
		rc = err_set(ERR_NOMEM, "%s: out of memory", path);
		goto out_close;
	}
	for (;;) {
		if (cap - len < 2) {
			if (cap > (SIZE_MAX >> 2) || cap > ((size_t)1 << 30)) {
				rc = err_set(ERR_RANGE, "%s: file too large", path);
				goto out_close;
			}
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				rc = err_set(ERR_NOMEM, "%s: out of memory", path);
				goto out_close;
			}
			buf = nb;
			cap *= 2;
		}
		size_t got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		rc = err_set(ERR_IO, "%s: read error", path);
		goto out_close;
	}
	if (memchr(buf, '\0', len)) {
		rc = err_set(ERR_INVAL, "%s: contains a NUL byte", path);
		goto out_close;
	}
	buf[len] = '\0';
	*out = buf;
	buf = NULL;
out_close:
	free(buf);
	fclose(f);
	return rc;
}

/* Write n floats little-endian whatever the host. */
static int write_f32_le(FILE *f, const float *x, size_t n)
{
	unsigned char b[4096];
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &x[i], 4);
		b[k++] = u & 0xff; b[k++] = (u >> 8) & 0xff; b[k++] = (u >> 16) & 0xff; b[k++] = u >> 24;
		if (k == sizeof b || i + 1 == n) {
			if (fwrite(b, 1, k, f) != k)
				return -1;
			k = 0;
		}
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cli_logits(int argc, char **argv)
{
	const char *model_path = NULL, *tokens_arg = NULL, *tokens_file = NULL, *out_path = NULL;
	const char *engine_name = DEFAULT_ENGINE, *last_arg = NULL, *kv_arg = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char **dst = NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--tokens")) {
			dst = &tokens_arg;
		} else if (!strcmp(a, "--tokens-file")) {
			dst = &tokens_file;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			dst = &out_path;
		} else if (!strcmp(a, "--engine")) {
			dst = &engine_name;
		} else if (!strcmp(a, "--vk-device")) {
			dst = &vk_device;
		} else if (!strcmp(a, "--last")) {
			dst = &last_arg;
		} else if (!strcmp(a, "--kv-type")) {
			dst = &kv_arg;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "unicorn logits: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		} else if (model_path) {
			fprintf(stderr, "unicorn logits: more than one MODEL ('%s' and '%s')\n", model_path, a);
			return 2;
		} else {
			model_path = a;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "unicorn logits: option %s needs a value\n", a);
			return 2;
		}
		*dst = argv[++i];
	}
	if (!model_path || !out_path || (!tokens_arg == !tokens_file)) {
		fprintf(stderr, "unicorn logits: %s\n",
			!model_path ? "MODEL is required" :
			!out_path ? "-o FILE is required" :
			tokens_arg ? "give --tokens or --tokens-file, not both" :
			"--tokens or --tokens-file is required");
		usage(stderr);
		return 2;
	}
	size_t last = 0;
	if (last_arg) {
		char *end;
		unsigned long long v = strtoull(last_arg, &end, 10);
		if (*end || end == last_arg || v == 0 || v > (1ull << 24)) {
			fprintf(stderr, "unicorn logits: --last '%s': rows, 1..%u\n", last_arg, 1u << 24);
			return 2;
		}
		last = (size_t)v;
	}
	if (kv_arg && kv_type_parse(kv_arg, &kv_type)) {
		fprintf(stderr, "unicorn logits: --kv-type: %s\n", err_msg());
		return 2;
	}
	kv_type = kv_arg ? kv_type : (!strcmp(engine_name, "reference") ? KV_TYPE_F32 : KV_TYPE_F16);
	const struct logits_engine *eng = NULL;
	for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++)
		if (!strcmp(engines[i].name, engine_name))
			eng = &engines[i];
	if (!eng) {
		fprintf(stderr, "unicorn logits: unknown engine '%s' (vulkan, vulkan-decode or reference)\n", engine_name);
		return 2;
	}

	uint32_t *ids = NULL;
	size_t n = 0, cap = 0;
	int rc;
	if (tokens_arg) {
		rc = parse_ids(tokens_arg, "--tokens", &ids, &n, &cap);
	} else {
		char *text = NULL;
		rc = read_text_file(tokens_file, &text);
		if (rc == 0)
			rc = parse_ids(text, tokens_file, &ids, &n, &cap);
		free(text);
	}
	if (rc < 0) {
		fprintf(stderr, "unicorn logits: %s\n", err_msg());
		free(ids);
		return rc == ERR_IO || rc == ERR_NOMEM ? 1 : 2;
	}
	if (n == 0) {
		fprintf(stderr, "unicorn logits: no token ids given\n");
		free(ids);
		return 2;
	}

	int status = 1;
	struct model *m = NULL;
	void *st = NULL;
	float *logits = NULL;
	FILE *out = NULL;
	if (model_open(model_path, &m) < 0) {
		fprintf(stderr, "unicorn logits: %s\n", err_msg());
		goto out_ids;
	}
	uint32_t V = m->cfg.n_vocab;
	for (size_t t = 0; t < n; t++)
		if (ids[t] >= V) {
			fprintf(stderr, "unicorn logits: token %zu: id %u >= n_vocab %u\n", t, ids[t], V);
			status = 2;
			goto out_model;
		}
	if (m->cfg.n_ctx && n > m->cfg.n_ctx) {
		fprintf(stderr, "unicorn logits: %zu tokens exceed the context length %u\n", n, m->cfg.n_ctx);
		status = 2;
		goto out_model;
	}
	first_row = last && last < n ? n - last : 0;
	logits = malloc((size_t)LOGITS_CHUNK * V * sizeof(float));
	if (!logits) {
		fprintf(stderr, "unicorn logits: out of memory\n");
		goto out_model;
	}
	double t0 = now_s();
	if (eng->create(m, (uint32_t)n, &st) < 0) {
		fprintf(stderr, "unicorn logits: %s engine: %s\n", eng->name, err_msg());
		goto out_model;
	}
	double t1 = now_s();
	out = strcmp(out_path, "-") ? fopen(out_path, "wb") : stdout;
	if (!out) {
		fprintf(stderr, "unicorn logits: %s: %s\n", out_path, strerror(errno));
		goto out_engine;
	}
	for (size_t t = 0; t < n; t += LOGITS_CHUNK) {
		uint32_t k = (uint32_t)(n - t < LOGITS_CHUNK ? n - t : LOGITS_CHUNK);
		if (eng->forward(st, ids + t, k, (uint32_t)t, logits) < 0) {
			fprintf(stderr, "unicorn logits: %s engine: tokens %zu..%zu: %s\n", eng->name, t,
				t + k - 1, err_msg());
			goto out_file;
		}
		size_t skip = first_row > t ? (first_row - t < k ? first_row - t : k) : 0; /* --last */
		if (write_f32_le(out, logits + skip * V, (size_t)(k - skip) * V) < 0) {
			fprintf(stderr, "unicorn logits: %s: write failed: %s\n", out_path, strerror(errno));
			goto out_file;
		}
	}
	if (fflush(out) != 0) {
		fprintf(stderr, "unicorn logits: %s: write failed: %s\n", out_path, strerror(errno));
		goto out_file;
	}
	double t2 = now_s();
	fprintf(stderr, "unicorn logits: T=%zu vocab=%u engine=%s setup=%.3fs forward=%.3fs (%.1f tok/s) -> %s\n",
		n, V, eng->name, t1 - t0, t2 - t1, (double)n / (t2 - t1 > 0 ? t2 - t1 : 1e-9), out_path);
	status = 0;
out_file:
	if (out != stdout) {
		if (fclose(out) != 0 && status == 0) {
			fprintf(stderr, "unicorn logits: %s: close failed: %s\n", out_path, strerror(errno));
			status = 1;
		}
		if (status != 0)
			remove(out_path); /* no half-written logits file */
	}
out_engine:
	eng->destroy(st);
out_model:
	free(logits);
	model_close(m);
out_ids:
	free(ids);
	return status;
}
