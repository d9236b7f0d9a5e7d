/* quantize: GGUF/HF Gemma 3 checkpoint -> quantized GGUF (see quantize.h). */
#include "tools/quantize.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "common/progress.h"
#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "formats/model.h"
#include "formats/quant.h"
#include "tools/mkmodel.h"

/* Copy every tokenizer.* key of a GGUF input as it is. */
static int qz_copy_tokenizer(struct gguf_writer *w, const struct gguf *g, int *copied)
{
	*copied = 0;
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct gguf_kv *kv = &g->kv[i];
		if (kv->key.len < 10 || memcmp(kv->key.ptr, "tokenizer.", 10))
			continue;
		char key[256];
		if (kv->key.len >= sizeof key)
			continue; /* not a key llama.cpp knows */
		memcpy(key, kv->key.ptr, kv->key.len);
		key[kv->key.len] = 0;
		int rc = gguf_writer_add_value(w, key, &kv->val);
		if (rc)
			return rc;
		(*copied)++;
	}
	return 0;
}

/* tokenizer.json beside an HF checkpoint (path is its directory or a file in it). */
static char *qz_hf_tokenizer(const char *path)
{
	char buf[PATH_MAX];
	struct stat st;
	if (stat(path, &st))
		return NULL;
	if (S_ISDIR(st.st_mode)) {
		if (snprintf(buf, sizeof buf, "%s/tokenizer.json", path) >= (int)sizeof buf)
			return NULL;
	} else {
		const char *slash = strrchr(path, '/');
		int dir = slash ? (int)(slash - path) : 1;
		if (snprintf(buf, sizeof buf, "%.*s/tokenizer.json", dir, slash ? path : ".") >= (int)sizeof buf)
			return NULL;
	}
	return stat(buf, &st) == 0 && S_ISREG(st.st_mode) ? strdup(buf) : NULL;
}

static void qz_default_name(const struct quantize_opts *o, const struct gguf *g, char *name, size_t n)
{
	struct gguf_str s;
	if (g && !gguf_get_str(g, "general.name", &s) && s.len < 200) {
		snprintf(name, n, "%.*s", (int)s.len, s.ptr);
		return;
	}
	err_clear();
	/* Last path component (without a trailing slash) */
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s", o->in);
	size_t len = strlen(tmp);
	while (len > 1 && tmp[len - 1] == '/')
		tmp[--len] = 0;
	const char *base = strrchr(tmp, '/');
	snprintf(name, n, "%.200s", base ? base + 1 : tmp);
}

/* Tokenizer metadata: --vocab, --tokenizer, the input GGUF's own, a
 * tokenizer.json beside an HF input, else synthetic tokens (with a warning:
 * llama.cpp loads it but the text side is meaningless). */
static int qz_tokenizer(const struct quantize_opts *o, const struct model *m, const struct gguf *g,
			struct gguf_writer *w)
{
	struct mkmodel_vocab v;
	int rc;
	if (!o->vocab && !o->tokenizer && g) {
		int copied;
		rc = qz_copy_tokenizer(w, g, &copied);
		if (rc || copied)
			return rc;
	}
	char *tj = NULL;
	if (o->vocab) {
		rc = mkmodel_vocab_from_gguf(o->vocab, &v);
	} else if (o->tokenizer) {
		rc = mkmodel_vocab_from_tokenizer_json(o->tokenizer, &v);
	} else if (m->format == MODEL_HF && (tj = qz_hf_tokenizer(o->in))) {
		rc = mkmodel_vocab_from_tokenizer_json(tj, &v);
		free(tj);
	} else {
		if (!o->quiet)
			fprintf(stderr, "unicorn quantize: %s has no tokenizer; writing synthetic <tok_N> tokens "
				"(use --vocab FILE.gguf or --tokenizer tokenizer.json)\n", o->in);
		rc = mkmodel_vocab_synthetic(m->cfg.n_vocab, &v);
	}
	if (rc)
		return rc;
	/* llama.cpp needs exactly one token per embedding row. */
	rc = mkmodel_vocab_fit(&v, m->cfg.n_vocab);
	if (!rc)
		rc = mkmodel_vocab_write_gguf(w, &v);
	mkmodel_vocab_free(&v);
	return rc;
}

static int qz_src(void *arg, uint64_t row0, uint64_t nrows, float *dst)
{
	/* Effective weights: the model adds norm_offset (HF norms: 1 + w). */
	return model_tensor_rows_f32(arg, row0, nrows, dst);
}

static int qz_sink(void *arg, const void *p, size_t n)
{
	return gguf_writer_write(arg, p, n);
}

int quantize_run(const struct quantize_opts *o)
{
	if (!o->in || !o->out)
		return err_set(ERR_INVAL, "quantize: input and output paths are required");
	if (!quant_type_info(o->type))
		return err_set(ERR_UNSUP, "quantize: type %s not supported", quant_preset_name(o->type, o->preset));
	struct model *m;
	int rc = model_open(o->in, &m);
	if (rc)
		return rc;
	struct gguf *g = NULL;
	if (m->format == MODEL_GGUF && (rc = gguf_open(o->in, &g))) {
		model_close(m);
		return rc;
	}
	const struct gemma3_config *cfg = &m->cfg;
	struct gguf_writer *w = NULL;
	char name[256];
	if (o->name)
		snprintf(name, sizeof name, "%s", o->name);
	else
		qz_default_name(o, g, name, sizeof name);

	size_t nt = mkmodel_tensor_count(cfg);
	const struct model_tensor **src = calloc(nt, sizeof *src);
	uint32_t *types = calloc(nt, sizeof *types);
	if (!src || !types) {
		rc = err_set(ERR_NOMEM, "out of memory");
		goto out;
	}
	/* Every tensor present with the shape the config implies (model_open
	 * checked most of this; the list here is what we will write). */
	for (size_t i = 0; i < nt; i++) {
		struct mkmodel_tensor t;
		mkmodel_tensor_at(cfg, i, &t);
		src[i] = model_find(m, t.name);
		if (!src[i]) {
			rc = err_set(ERR_NOTFOUND, "%s: tensor %s: missing", o->in, t.name);
			goto out;
		}
		if (src[i]->ne[0] != t.ne[0] || src[i]->ne[1] != t.ne[1] || src[i]->ne[2] != 1 ||
		    src[i]->ne[3] != 1) {
			rc = err_set(ERR_INVAL, "%s: tensor %s: shape [%llu, %llu] but the config implies [%llu, %llu]",
				     o->in, t.name, (unsigned long long)src[i]->ne[0],
				     (unsigned long long)src[i]->ne[1], (unsigned long long)t.ne[0],
				     (unsigned long long)t.ne[1]);
			goto out;
		}
		types[i] = mkmodel_tensor_type(cfg, &t, o->type, o->preset);
		const struct quant_type_info *ti = quant_type_info(types[i]);
		if (!ti) {
			rc = err_set(ERR_UNSUP, "%s: tensor %s: type %s (for --type %s) is not supported", o->in,
				     t.name, quant_preset_name(types[i], QUANT_PRESET_NONE),
				     quant_preset_name(o->type, o->preset));
			goto out;
		}
		if (ti->block_elems > 1 && t.ne[0] % ti->block_elems) {
			rc = err_set(ERR_UNSUP, "%s: tensor %s: rows of %llu elements are not a multiple of the %s block size %u",
				     o->in, t.name, (unsigned long long)t.ne[0], ti->name, ti->block_elems);
			goto out;
		}
	}

	if ((rc = gguf_writer_create(o->out, &w)))
		goto out;
	if ((rc = mkmodel_gguf_config(w, cfg, name, quant_preset_file_type(o->type, o->preset))) ||
	    (rc = qz_tokenizer(o, m, g, w)))
		goto out;
	for (size_t i = 0; i < nt; i++) {
		struct mkmodel_tensor t;
		mkmodel_tensor_at(cfg, i, &t);
		if ((rc = gguf_writer_add_tensor(w, t.name, types[i], t.n_dims, t.ne)))
			goto out;
	}
	if ((rc = gguf_writer_begin_data(w)))
		goto out;

	struct progress prog;
	progress_init(&prog, stderr, "quantize", gguf_writer_file_size(w));
	progress_set_quiet(&prog, o->quiet);
	progress_update(&prog, gguf_writer_data_offset(w));
	for (size_t i = 0; i < nt; i++) {
		struct mkmodel_tensor t;
		mkmodel_tensor_at(cfg, i, &t);
		struct mkmodel_stream s = {
			.ne0 = t.ne[0], .nrows = t.ne[1],
			.type = types[i],
			.src = qz_src, .src_arg = (void *)src[i], .sink = qz_sink, .sink_arg = w,
			.prog = &prog, .threads = o->threads, .what = t.name,
		};
		if ((rc = mkmodel_stream_tensor(&s)))
			goto out;
	}
	if ((rc = gguf_writer_finish(w)))
		goto out;
	progress_update(&prog, gguf_writer_file_size(w));
	progress_finish(&prog);
out:
	gguf_writer_destroy(w);
	free(types);
	free(src);
	gguf_close(g);
	model_close(m);
	return rc;
}
