/* golden: loading ../shared/golden/gemma3-tiny.json and its logits, and the
 * tolerance checks of golden/README.md (see golden.h). */
#include "tests/golden.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

#define GOLDEN_JSON "golden/gemma3-tiny.json"

const char *golden_shared_dir(void)
{
	const char *s = getenv("UNICORN_SHARED");
	return (s && *s) ? s : "../shared";
}

/* Read a JSON array of non-negative integers < limit into a new array of n. */
static int read_ids(json_t *arr, const char *what, uint32_t limit, uint32_t **out, uint32_t *n)
{
	if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > UINT32_MAX)
		return err_set(ERR_INVAL, "%s: %s: not a non-empty array", GOLDEN_JSON, what);
	size_t cnt = json_array_size(arr);
	uint32_t *ids = malloc(cnt * sizeof *ids);
	if (!ids)
		return err_set(ERR_NOMEM, "%s: %s: out of memory", GOLDEN_JSON, what);
	for (size_t i = 0; i < cnt; i++) {
		json_t *v = json_array_get(arr, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= limit) {
			free(ids);
			return err_set(ERR_INVAL, "%s: %s[%zu]: not an id below %u", GOLDEN_JSON, what, i, limit);
		}
		ids[i] = (uint32_t)json_integer_value(v);
	}
	*out = ids;
	*n = (uint32_t)cnt;
	return 0;
}

static int read_logits(const char *path, uint64_t count, float **out)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return err_set(ERR_IO, "%s: cannot open", path);
	int rc = 0;
	unsigned char *raw = NULL;
	float *vals = NULL;
	if (fseek(f, 0, SEEK_END) != 0) {
		rc = err_set(ERR_IO, "%s: cannot seek", path);
		goto out_close;
	}
	long size = ftell(f);
	if (size < 0 || (uint64_t)size != count * 4) {
		rc = err_set(ERR_INVAL, "%s: size %ld, expected %llu (float32 [tokens][vocab])", path, size,
			     (unsigned long long)(count * 4));
		goto out_close;
	}
	rewind(f);
	raw = malloc((size_t)count * 4);
	vals = malloc((size_t)count * sizeof(float));
	if (!raw || !vals) {
		rc = err_set(ERR_NOMEM, "%s: out of memory", path);
		goto out_close;
	}
	if (fread(raw, 4, (size_t)count, f) != count) {
		rc = err_set(ERR_IO, "%s: short read", path);
		goto out_close;
	}
	/* The file is little-endian whatever the host. */
	for (uint64_t i = 0; i < count; i++) {
		uint32_t u = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
			     (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
		memcpy(&vals[i], &u, 4);
	}
	*out = vals;
	vals = NULL;
out_close:
	free(raw);
	free(vals);
	fclose(f);
	return rc;
}

int golden_load(const char *enc, struct golden *g)
{
	memset(g, 0, sizeof *g);
	const char *dir = golden_shared_dir();
	char path[GOLDEN_PATH_MAX];
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, GOLDEN_JSON) >= sizeof path)
		return err_set(ERR_RANGE, "golden: path too long");
	json_error_t jerr;
	json_t *root = json_load_file(path, 0, &jerr);
	if (!root)
		return err_set(ERR_IO, "%s: %s (line %d)", path, jerr.text, jerr.line);
	int rc = 0;
	json_t *vocab = json_object_get(json_object_get(root, "config"), "vocab");
	json_t *files = json_object_get(root, "files");
	json_t *e = json_object_get(files, enc);
	if (!json_is_integer(vocab) || json_integer_value(vocab) <= 0 || json_integer_value(vocab) > (1 << 24)) {
		rc = err_set(ERR_INVAL, "%s: config.vocab: missing or out of range", path);
		goto out;
	}
	if (!json_is_object(e)) {
		rc = err_set(ERR_NOTFOUND, "%s: files.%s: no such encoding", path, enc);
		goto out;
	}
	snprintf(g->enc, sizeof g->enc, "%s", enc);
	g->n_vocab = (uint32_t)json_integer_value(vocab);
	if ((rc = read_ids(json_object_get(root, "tokens"), "tokens", g->n_vocab, &g->tokens, &g->n_tokens)) < 0)
		goto out;

	/* The HF copy has the f32 weights, hence the f32 file's logits and greedy ids. */
	json_t *greedy = json_object_get(e, "greedy_next");
	if (!greedy)
		greedy = json_object_get(json_object_get(files, "f32"), "greedy_next");
	uint32_t n_greedy = 0;
	if ((rc = read_ids(greedy, "greedy_next", g->n_vocab, &g->greedy_next, &n_greedy)) < 0)
		goto out;
	if (n_greedy != g->n_tokens) {
		rc = err_set(ERR_INVAL, "%s: files.%s.greedy_next: %u entries for %u tokens", path, enc,
			     n_greedy, g->n_tokens);
		goto out;
	}

	json_t *model = json_object_get(e, "gguf");
	if (!model)
		model = json_object_get(e, "dir");
	json_t *logits = json_object_get(e, "logits");
	if (!json_is_string(model) || !json_is_string(logits)) {
		rc = err_set(ERR_INVAL, "%s: files.%s: gguf/dir or logits missing", path, enc);
		goto out;
	}
	if ((size_t)snprintf(g->model_path, sizeof g->model_path, "%s/golden/%s", dir,
			     json_string_value(model)) >= sizeof g->model_path ||
	    (size_t)snprintf(path, sizeof path, "%s/golden/%s", dir, json_string_value(logits)) >= sizeof path) {
		rc = err_set(ERR_RANGE, "golden: path too long");
		goto out;
	}
	if ((rc = read_logits(path, (uint64_t)g->n_tokens * g->n_vocab, &g->logits)) < 0)
		goto out;

	bool f32 = !strcmp(enc, "f32") || !strcmp(enc, "hf");
	g->rel_tol = f32 ? 1e-4 : 5e-3;
	g->tie_margin = f32 ? 0.0 : 0.02;
out:
	json_decref(root);
	if (rc < 0)
		golden_free(g);
	return rc;
}

void golden_free(struct golden *g)
{
	free(g->tokens);
	free(g->greedy_next);
	free(g->logits);
	g->tokens = g->greedy_next = NULL;
	g->logits = NULL;
	g->n_tokens = 0;
}

uint32_t golden_argmax(const float *x, uint32_t n)
{
	uint32_t best = 0;
	float bv = -INFINITY;
	for (uint32_t i = 0; i < n; i++)
		if (x[i] > bv) {
			bv = x[i];
			best = i;
		}
	return best;
}

void golden_check_row(const struct golden *g, uint32_t t, const float *ours, struct golden_row *res)
{
	const float *ref = g->logits + (uint64_t)t * g->n_vocab;
	double num = 0, den = 0;
	bool bad = false;
	for (uint32_t i = 0; i < g->n_vocab; i++) {
		double a = ours[i], b = ref[i];
		if (isinf(a) && isinf(b) && a == b)
			continue; /* both masked */
		if (!isfinite(a) || !isfinite(b)) {
			bad = true;
			continue;
		}
		num += (a - b) * (a - b);
		den += b * b;
	}
	res->rel = bad ? INFINITY : (den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0));

	res->argmax_ref = golden_argmax(ref, g->n_vocab);
	res->argmax_ours = golden_argmax(ours, g->n_vocab);
	float top = ref[res->argmax_ref], second = -INFINITY;
	for (uint32_t i = 0; i < g->n_vocab; i++)
		if (i != res->argmax_ref && ref[i] > second)
			second = ref[i];
	res->ref_lead = (double)top - (double)second;
	res->argmax_checked = res->ref_lead >= g->tie_margin;
	res->ok = res->rel <= g->rel_tol &&
		  (!res->argmax_checked || res->argmax_ours == res->argmax_ref);
}

bool golden_check_all(const struct golden *g, const float *ours, struct golden_summary *s)
{
	memset(s, 0, sizeof *s);
	s->first_fail = g->n_tokens;
	for (uint32_t t = 0; t < g->n_tokens; t++) {
		struct golden_row r;
		golden_check_row(g, t, ours + (uint64_t)t * g->n_vocab, &r);
		if (t == 0 || r.rel > s->max_rel) {
			s->max_rel = r.rel;
			s->worst_pos = t;
		}
		if (r.argmax_checked)
			s->n_argmax_checked++;
		if (!r.ok) {
			if (s->n_fail == 0)
				s->first_fail = t;
			s->n_fail++;
		}
	}
	return s->n_fail == 0;
}
