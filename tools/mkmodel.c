/* mkmodel: write a synthetic Gemma 3 checkpoint with seeded random weights
 * (see mkmodel.h). */
#include "tools/mkmodel.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/progress.h"
#include "formats/quant.h"
#include "formats/safetensors_write.h"

#define MK_CHUNK_ELEMS (1u << 22) /* f32 staging per chunk: 16 MiB */
#define MK_MAX_THREADS 8

/* ---- random weights ---- */

/* splitmix64's output function: a good 64-bit mix of a counter, so element e
 * of a tensor is mix(base + e*gamma) — random access, any chunking. */
static inline uint64_t mk_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#define MK_GAMMA 0x9e3779b97f4a7c15ull

static float mk_std(const struct mkmodel_tensor *t)
{
	switch (t->kind) {
	case MKMODEL_EMBED: return 0.03f;               /* x sqrt(n_embd) in the forward pass */
	case MKMODEL_NORM: return 0.05f;                /* raw w; effective 1 + w */
	default: return 1.0f / sqrtf((float)t->ne[0]);  /* keeps activations O(1) */
	}
}

void mkmodel_fill(const struct gemma3_config *cfg, uint64_t seed, size_t tensor_index,
		  uint64_t first, float *dst, uint64_t n)
{
	struct mkmodel_tensor t;
	mkmodel_tensor_at(cfg, tensor_index, &t);
	uint64_t base = mk_mix(seed ^ mk_mix(0x5eed0000ull + tensor_index));
	/* Sum of two uniforms in [-1, 1): triangular, std sqrt(2/3); normal-ish
	 * and bounded, one 64-bit draw per value. */
	float k = mk_std(&t) / sqrtf(2.0f / 3.0f) * (1.0f / 2147483648.0f);
	uint64_t z = base + (first + 1) * MK_GAMMA;
	for (uint64_t i = 0; i < n; i++, z += MK_GAMMA) {
		uint64_t r = mk_mix(z);
		int32_t a = (int32_t)(uint32_t)(r >> 32), b = (int32_t)(uint32_t)r;
		dst[i] = (float)((int64_t)a + (int64_t)b) * k;
	}
}

/* ---- threads ---- */

struct mk_par {
	int (*fn)(void *arg, size_t i);
	void *arg;
	size_t n;
	atomic_size_t next;
	atomic_int rc;
};

static void *mk_par_worker(void *p)
{
	struct mk_par *par = p;
	for (;;) {
		size_t i = atomic_fetch_add(&par->next, 1);
		if (i >= par->n || atomic_load(&par->rc))
			break;
		int rc = par->fn(par->arg, i);
		if (rc) {
			int zero = 0;
			atomic_compare_exchange_strong(&par->rc, &zero, rc);
		}
	}
	return NULL;
}

static int mk_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > MK_MAX_THREADS ? MK_MAX_THREADS : (int)n;
}

int mkmodel_parallel(int threads, size_t n, int (*fn)(void *arg, size_t i), void *arg)
{
	if (threads <= 0)
		threads = mk_cpus();
	if ((size_t)threads > n)
		threads = (int)n;
	struct mk_par par = { .fn = fn, .arg = arg, .n = n };
	atomic_init(&par.next, 0);
	atomic_init(&par.rc, 0);
	pthread_t tid[MK_MAX_THREADS];
	int started = 0;
	for (int i = 1; i < threads && i < MK_MAX_THREADS; i++) {
		if (pthread_create(&tid[started], NULL, mk_par_worker, &par))
			break; /* fewer threads is fine: the caller's thread does the rest */
		started++;
	}
	mk_par_worker(&par);
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	/* Errors are recorded per thread (err_set is thread-local); a worker's
	 * message is lost, so restate the code here when ours is empty. */
	return atomic_load(&par.rc);
}

/* ---- streaming one tensor ---- */

struct mk_chunk {
	const struct mkmodel_stream *s;
	uint64_t row0;       /* first row of the chunk */
	uint64_t rows;       /* rows in the chunk */
	uint64_t rows_per_task;
	uint64_t row_bytes;
	float *f32;
	uint8_t *out;
	char errmsg[256];
};

static int mk_chunk_task(void *arg, size_t i)
{
	struct mk_chunk *c = arg;
	const struct mkmodel_stream *s = c->s;
	uint64_t r0 = (uint64_t)i * c->rows_per_task;
	if (r0 >= c->rows)
		return 0;
	uint64_t nr = c->rows - r0 < c->rows_per_task ? c->rows - r0 : c->rows_per_task;
	float *f = c->f32 + r0 * s->ne0;
	int rc = s->src(s->src_arg, c->row0 + r0, nr, f);
	if (!rc && s->add != 0) {
		for (uint64_t j = 0; j < nr * s->ne0; j++)
			f[j] += s->add;
	}
	if (!rc)
		rc = quant_quantize(s->type, f, c->out + r0 * c->row_bytes, nr * s->ne0);
	if (rc)
		snprintf(c->errmsg, sizeof c->errmsg, "%s", err_msg());
	return rc;
}

int mkmodel_stream_tensor(const struct mkmodel_stream *s)
{
	const char *what = s->what ? s->what : "tensor";
	uint64_t row_bytes;
	int rc = quant_row_bytes(s->type, s->ne0, &row_bytes);
	if (rc)
		return err_prefix(rc, "%s", what);
	if (s->ne0 == 0 || s->ne0 > MK_CHUNK_ELEMS * 4ull)
		return err_set(ERR_RANGE, "%s: row length %llu not supported", what, (unsigned long long)s->ne0);
	uint64_t chunk_rows = MK_CHUNK_ELEMS / s->ne0;
	if (chunk_rows == 0)
		chunk_rows = 1;
	if (chunk_rows > s->nrows)
		chunk_rows = s->nrows;
	if (chunk_rows == 0)
		return 0;
	float *f32 = malloc(chunk_rows * s->ne0 * sizeof(float));
	uint8_t *out = malloc(chunk_rows * row_bytes);
	if (!f32 || !out) {
		free(f32);
		free(out);
		return err_set(ERR_NOMEM, "%s: out of memory for a %llu-row chunk", what,
			       (unsigned long long)chunk_rows);
	}
	int threads = s->threads > 0 ? s->threads : mk_cpus();
	struct mk_chunk c = { .s = s, .row_bytes = row_bytes, .f32 = f32, .out = out };
	for (uint64_t r = 0; r < s->nrows && !rc; r += chunk_rows) {
		c.row0 = r;
		c.rows = s->nrows - r < chunk_rows ? s->nrows - r : chunk_rows;
		/* Several tasks per thread even out uneven progress. */
		uint64_t tasks = (uint64_t)threads * 4;
		c.rows_per_task = (c.rows + tasks - 1) / tasks;
		size_t n_tasks = (size_t)((c.rows + c.rows_per_task - 1) / c.rows_per_task);
		c.errmsg[0] = 0;
		rc = mkmodel_parallel(threads, n_tasks, mk_chunk_task, &c);
		if (rc) {
			rc = err_set(rc, "%s: %s", what, c.errmsg[0] ? c.errmsg : err_name(rc));
			break;
		}
		rc = s->sink(s->sink_arg, out, (size_t)(c.rows * row_bytes));
		if (!rc && s->prog)
			progress_add(s->prog, c.rows * row_bytes);
	}
	free(f32);
	free(out);
	return rc;
}

/* ---- the tool ---- */

struct mk_src {
	const struct gemma3_config *cfg;
	uint64_t seed;
	size_t index;
	uint64_t ne0;
};

static int mk_src_random(void *arg, uint64_t row0, uint64_t nrows, float *dst)
{
	const struct mk_src *m = arg;
	mkmodel_fill(m->cfg, m->seed, m->index, row0 * m->ne0, dst, nrows * m->ne0);
	return 0;
}

static int mk_sink_gguf(void *arg, const void *p, size_t n)
{
	return gguf_writer_write(arg, p, n);
}

static int mk_sink_st(void *arg, const void *p, size_t n)
{
	return safetensors_writer_write(arg, p, n);
}

/* Pick the vocabulary: explicit options, then Gemma 3's tokenizer.json for
 * real shapes (262144 rows) or the Llama SPM vocabulary for tiny (32000). */
static int mk_vocab(const struct mkmodel_opts *o, const struct gemma3_config *cfg, struct mkmodel_vocab *v)
{
	int rc;
	char *path = NULL;
	if (o->vocab)
		return mkmodel_vocab_from_gguf(o->vocab, v);
	if (o->tokenizer)
		return mkmodel_vocab_from_tokenizer_json(o->tokenizer, v);
	if (!o->synthetic_vocab) {
		if (cfg->n_vocab >= 262144 && (path = mkmodel_find_gemma3_tokenizer())) {
			rc = mkmodel_vocab_from_tokenizer_json(path, v);
			free(path);
			if (rc == 0)
				return 0;
		} else if (cfg->n_vocab < 262144 && (path = mkmodel_find_llama_vocab())) {
			rc = mkmodel_vocab_from_gguf(path, v);
			free(path);
			if (rc == 0 && v->n == cfg->n_vocab)
				return 0; /* a different size (--layers on another vocab) won't fit */
			if (rc == 0)
				mkmodel_vocab_free(v);
		}
		if (!o->quiet)
			fprintf(stderr, "unicorn-mkmodel: no matching vocabulary found; using synthetic <tok_N> tokens\n");
	}
	return mkmodel_vocab_synthetic(cfg->n_vocab, v);
}

static int mk_write_gguf(const struct mkmodel_opts *o, const struct gemma3_config *cfg, const char *name,
			 int threads)
{
	struct gguf_writer *w;
	struct mkmodel_vocab v;
	int rc = mk_vocab(o, cfg, &v);
	if (rc)
		return rc;
	if (!o->quiet)
		fprintf(stderr, "unicorn-mkmodel: vocabulary %s (%llu tokens)\n", v.source,
			(unsigned long long)v.n);
	rc = mkmodel_vocab_fit(&v, cfg->n_vocab);
	if (rc) {
		mkmodel_vocab_free(&v);
		return rc;
	}
	rc = gguf_writer_create(o->out, &w);
	if (rc) {
		mkmodel_vocab_free(&v);
		return rc;
	}
	rc = mkmodel_gguf_config(w, cfg, name, quant_preset_file_type(o->type, o->preset));
	if (!rc)
		rc = mkmodel_vocab_write_gguf(w, &v);
	mkmodel_vocab_free(&v);
	size_t nt = mkmodel_tensor_count(cfg);
	for (size_t i = 0; i < nt && !rc; i++) {
		struct mkmodel_tensor t;
		mkmodel_tensor_at(cfg, i, &t);
		/* llama.cpp keeps norms (1-D) in f32 whatever the file type. */
		rc = gguf_writer_add_tensor(w, t.name, mkmodel_tensor_type(cfg, &t, o->type, o->preset), t.n_dims,
					    t.ne);
	}
	if (!rc)
		rc = gguf_writer_begin_data(w);
	struct progress prog;
	progress_init(&prog, stderr, "mkmodel", rc ? 0 : gguf_writer_file_size(w));
	progress_set_quiet(&prog, o->quiet);
	if (!rc)
		progress_update(&prog, gguf_writer_data_offset(w));
	for (size_t i = 0; i < nt && !rc; i++) {
		struct mkmodel_tensor t;
		mkmodel_tensor_at(cfg, i, &t);
		struct mk_src src = { .cfg = cfg, .seed = o->seed, .index = i, .ne0 = t.ne[0] };
		struct mkmodel_stream s = {
			.ne0 = t.ne[0], .nrows = t.ne[1],
			.type = mkmodel_tensor_type(cfg, &t, o->type, o->preset),
			.add = t.kind == MKMODEL_NORM ? 1.0f : 0.0f, /* GGUF norms hold 1+w */
			.src = mk_src_random, .src_arg = &src, .sink = mk_sink_gguf, .sink_arg = w,
			.prog = &prog, .threads = threads, .what = t.name,
		};
		rc = mkmodel_stream_tensor(&s);
	}
	if (!rc)
		rc = gguf_writer_finish(w);
	if (!rc) {
		progress_update(&prog, gguf_writer_file_size(w)); /* + alignment padding */
		progress_finish(&prog);
	}
	gguf_writer_destroy(w);
	return rc;
}

static int mk_copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb");
	if (!in)
		return err_set(ERR_IO, "%s: %s", from, strerror(errno));
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp", to) >= (int)sizeof tmp) {
		fclose(in);
		return err_set(ERR_RANGE, "%s: path too long", to);
	}
	FILE *out = fopen(tmp, "wb");
	if (!out) {
		fclose(in);
		return err_set(ERR_IO, "%s: %s", tmp, strerror(errno));
	}
	static char buf[1 << 16];
	size_t n;
	int bad = 0;
	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			bad = 1;
	bad |= ferror(in);
	fclose(in);
	bad |= fclose(out) != 0;
	if (bad || rename(tmp, to)) {
		unlink(tmp);
		return err_set(ERR_IO, "%s: copy from %s failed", to, from);
	}
	return 0;
}

static int mk_write_hf(const struct mkmodel_opts *o, const struct gemma3_config *cfg, int threads)
{
	if (mkdir(o->out, 0777) && errno != EEXIST)
		return err_set(ERR_IO, "%s: cannot create directory: %s", o->out, strerror(errno));
	size_t dl = strlen(o->out);
	char *cfg_path = malloc(dl + 32), *st_path = malloc(dl + 32), *tok_path = malloc(dl + 32);
	int rc = 0;
	struct safetensors_writer *w = NULL;
	if (!cfg_path || !st_path || !tok_path) {
		rc = err_set(ERR_NOMEM, "out of memory");
		goto out;
	}
	sprintf(cfg_path, "%s/config.json", o->out);
	sprintf(st_path, "%s/model.safetensors", o->out);
	sprintf(tok_path, "%s/tokenizer.json", o->out);
	rc = safetensors_writer_create(st_path, &w);
	size_t nt = mkmodel_tensor_count(cfg);
	for (size_t i = 0; i < nt && !rc; i++) {
		struct mkmodel_tensor t;
		mkmodel_tensor_at(cfg, i, &t);
		uint64_t shape[2] = { t.ne[1], t.ne[0] }; /* HF [out, in] */
		if (t.n_dims == 1)
			rc = safetensors_writer_add_tensor(w, t.hf_name, o->type, 1, &t.ne[0]);
		else
			rc = safetensors_writer_add_tensor(w, t.hf_name, o->type, 2, shape);
	}
	if (!rc)
		rc = safetensors_writer_begin_data(w);
	uint64_t total = 0;
	for (size_t i = 0; i < nt; i++) {
		struct mkmodel_tensor t;
		mkmodel_tensor_at(cfg, i, &t);
		total += t.ne[0] * t.ne[1] * (o->type == TENSOR_F32 ? 4 : 2);
	}
	struct progress prog;
	progress_init(&prog, stderr, "mkmodel", total);
	progress_set_quiet(&prog, o->quiet);
	for (size_t i = 0; i < nt && !rc; i++) {
		struct mkmodel_tensor t;
		mkmodel_tensor_at(cfg, i, &t);
		struct mk_src src = { .cfg = cfg, .seed = o->seed, .index = i, .ne0 = t.ne[0] };
		struct mkmodel_stream s = {
			.ne0 = t.ne[0], .nrows = t.ne[1], .type = o->type, .add = 0, /* HF norms: raw w */
			.src = mk_src_random, .src_arg = &src, .sink = mk_sink_st, .sink_arg = w,
			.prog = &prog, .threads = threads, .what = t.hf_name,
		};
		rc = mkmodel_stream_tensor(&s);
	}
	if (!rc)
		rc = safetensors_writer_finish(w);
	if (!rc)
		/* Gemma's ids (bos 2, eos 1); tiny's vocabulary is Llama's (bos 1, eos 2),
		 * as in ../shared/golden/gemma3-tiny-hf/config.json. */
		rc = cfg->n_vocab >= 262144 ? safetensors_write_gemma3_config(cfg_path, cfg, o->type, 2, 1, 0)
					    : safetensors_write_gemma3_config(cfg_path, cfg, o->type, 1, 2, 0);
	if (!rc)
		progress_finish(&prog);
	/* Ship the tokenizer with real-vocabulary models (tiny's vocabulary is
	 * Llama's SPM one, which has no tokenizer.json). */
	if (!rc && cfg->n_vocab >= 262144 && !o->synthetic_vocab) {
		char *tj = o->tokenizer ? strdup(o->tokenizer) : mkmodel_find_gemma3_tokenizer();
		if (tj) {
			rc = mk_copy_file(tj, tok_path);
			free(tj);
		}
	}
out:
	safetensors_writer_destroy(w);
	free(cfg_path);
	free(st_path);
	free(tok_path);
	return rc;
}

int mkmodel_run(const struct mkmodel_opts *o)
{
	struct gemma3_config cfg;
	const char *shape = o->shape ? o->shape : "tiny";
	int rc = mkmodel_shape_config(shape, o->layers, &cfg);
	if (rc)
		return rc;
	if (o->ctx)
		cfg.n_ctx = o->ctx;
	if (!o->out)
		return err_set(ERR_INVAL, "no output path (-o)");
	if (!quant_type_info(o->type))
		return err_set(ERR_UNSUP, "type %s: not supported", quant_preset_name(o->type, o->preset));
	enum mkmodel_format fmt = o->format ? o->format : MKMODEL_GGUF;
	if (fmt == MKMODEL_HF && (o->preset != QUANT_PRESET_NONE || !safetensors_dtype_name(o->type)))
		return err_set(ERR_UNSUP, "type %s: only f32, f16 and bf16 can be written as a Hugging Face checkpoint; use --format gguf",
			       quant_preset_name(o->type, o->preset));
	char name[64];
	if (o->name)
		snprintf(name, sizeof name, "%s", o->name);
	else
		snprintf(name, sizeof name, "synthetic-gemma3-%s", shape);
	int threads = o->threads > 0 ? o->threads : mk_cpus();
	struct vision_config vc;
	if (o->vision) {
		if (fmt != MKMODEL_GGUF)
			return err_set(ERR_UNSUP, "--vision: only with --format gguf (the tower goes in an mmproj GGUF)");
		if ((rc = mkmodel_vision_config(shape, cfg.n_embd, &vc)))
			return rc;
	}
	rc = fmt == MKMODEL_HF ? mk_write_hf(o, &cfg, threads) : mk_write_gguf(o, &cfg, name, threads);
	if (rc || !o->vision)
		return rc;
	char *mp = mkmodel_mmproj_path(o->out);
	if (!mp)
		return err_set(ERR_NOMEM, "out of memory");
	/* A different seed stream from the text model's tensors. */
	rc = mkmodel_write_mmproj(mp, &vc, o->type, o->seed ^ 0x766973696f6eull, threads, o->quiet);
	if (!rc && !o->quiet)
		fprintf(stderr, "unicorn-mkmodel: vision tower %s (%u tokens per image)\n", mp, vc.n_tokens);
	free(mp);
	return rc;
}
