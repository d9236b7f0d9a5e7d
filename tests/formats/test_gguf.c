/* Tests for formats/gguf: a tiny in-memory GGUF builder, round trips of every
 * value type, one negative test per validation rule (code + message), and the
 * real files in ../shared. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "formats/gguf.h"
#include "formats/quant.h"
#include "tests/golden.h"

/* ---- builder ---------------------------------------------------------- */

struct gb {
	uint8_t *b;
	size_t n, cap;
};

static void gb_raw(struct gb *g, const void *p, size_t n)
{
	if (g->n + n > g->cap) {
		size_t cap = g->cap ? g->cap : 256;
		while (cap < g->n + n)
			cap *= 2;
		g->b = realloc(g->b, cap);
		cr_assert(g->b);
		g->cap = cap;
	}
	if (n)
		memcpy(g->b + g->n, p, n);
	g->n += n;
}

static void gb_u8(struct gb *g, uint8_t v) { gb_raw(g, &v, 1); }

static void gb_u16(struct gb *g, uint16_t v)
{
	uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	gb_raw(g, b, 2);
}

static void gb_u32(struct gb *g, uint32_t v)
{
	uint8_t b[4];
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	gb_raw(g, b, 4);
}

static void gb_u64(struct gb *g, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	gb_raw(g, b, 8);
}

static void gb_f32(struct gb *g, float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	gb_u32(g, u);
}

static void gb_f64(struct gb *g, double f)
{
	uint64_t u;
	memcpy(&u, &f, 8);
	gb_u64(g, u);
}

static void gb_str(struct gb *g, const char *s)
{
	gb_u64(g, strlen(s));
	gb_raw(g, s, strlen(s));
}

static void gb_hdr(struct gb *g, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
	gb_raw(g, "GGUF", 4);
	gb_u32(g, version);
	gb_u64(g, n_tensors);
	gb_u64(g, n_kv);
}

/* key + value type; the caller appends the value. */
static void gb_key(struct gb *g, const char *key, uint32_t type)
{
	gb_str(g, key);
	gb_u32(g, type);
}

static void gb_kv_u32(struct gb *g, const char *key, uint32_t v)
{
	gb_key(g, key, GGUF_U32);
	gb_u32(g, v);
}

static void gb_kv_str(struct gb *g, const char *key, const char *v)
{
	gb_key(g, key, GGUF_STRING);
	gb_str(g, v);
}

static void gb_tinfo(struct gb *g, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
		     uint64_t offset)
{
	gb_str(g, name);
	gb_u32(g, n_dims);
	for (uint32_t d = 0; d < n_dims; d++)
		gb_u64(g, ne[d]);
	gb_u32(g, type);
	gb_u64(g, offset);
}

static void gb_pad(struct gb *g, size_t align)
{
	while (g->n % align)
		gb_u8(g, 0);
}

static void gb_fill(struct gb *g, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		gb_u8(g, v);
}

static void gb_free(struct gb *g)
{
	free(g->b);
	memset(g, 0, sizeof *g);
}

/* Parse from an exact-size heap copy so that ASan sees any over-read. */
static int parse_n(const struct gb *b, size_t n, struct gguf **g)
{
	uint8_t *copy = malloc(n ? n : 1);
	cr_assert(copy);
	if (n)
		memcpy(copy, b->b, n);
	int rc = gguf_parse(copy, n, "t.gguf", g);
	if (rc) {
		cr_assert_null(*g);
		free(copy);
	}
	return rc; /* on success the copy lives until free_parsed */
}

static void free_parsed(struct gguf *g)
{
	void *copy = (void *)g->base;
	gguf_close(g);
	free(copy);
}

static struct gguf *parse_ok(const struct gb *b)
{
	struct gguf *g = NULL;
	int rc = parse_n(b, b->n, &g);
	cr_assert_eq(rc, 0, "parse failed: %d %s", rc, err_msg());
	cr_assert_not_null(g);
	return g;
}

static void expect_fail(const struct gb *b, int code, const char *substr)
{
	struct gguf *g = (struct gguf *)1;
	err_clear();
	int rc = parse_n(b, b->n, &g);
	cr_assert_eq(rc, code, "rc %d (%s), expected %d; msg: %s", rc, err_name(rc), code, err_msg());
	cr_assert_null(g);
	cr_assert(strstr(err_msg(), substr), "message '%s' lacks '%s'", err_msg(), substr);
	cr_assert(strstr(err_msg(), "t.gguf"), "message '%s' does not name the file", err_msg());
}

/* A file with one kv of the given type whose value bytes the caller appends. */
static void one_kv(struct gb *b, const char *key, uint32_t type)
{
	gb_hdr(b, 3, 0, 1);
	gb_key(b, key, type);
}

struct tspec {
	const char *name;
	uint32_t n_dims;
	uint64_t ne[4];
	uint32_t type;
	uint64_t offset;
};

/* Header, no kv (default alignment 32), the infos, padding, data_bytes of data. */
static void tensor_file(struct gb *b, const struct tspec *t, int n, size_t data_bytes)
{
	gb_hdr(b, 3, (uint64_t)n, 0);
	for (int i = 0; i < n; i++)
		gb_tinfo(b, t[i].name, t[i].n_dims, t[i].ne, t[i].type, t[i].offset);
	gb_pad(b, 32);
	gb_fill(b, data_bytes, 0x5a);
}

static void expect_tensor_fail(const struct tspec *t, int n, size_t data_bytes, int code, const char *substr)
{
	struct gb b = {0};
	tensor_file(&b, t, n, data_bytes);
	expect_fail(&b, code, substr);
	gb_free(&b);
}

/* ---- positive --------------------------------------------------------- */

Test(gguf, scalar_values_round_trip)
{
	struct gb b = {0};
	gb_hdr(&b, 3, 0, 15);
	gb_key(&b, "u8", GGUF_U8), gb_u8(&b, 200);
	gb_key(&b, "i8", GGUF_I8), gb_u8(&b, (uint8_t)-5);
	gb_key(&b, "u16", GGUF_U16), gb_u16(&b, 60000);
	gb_key(&b, "i16", GGUF_I16), gb_u16(&b, (uint16_t)-30000);
	gb_key(&b, "u32", GGUF_U32), gb_u32(&b, 4000000000u);
	gb_key(&b, "i32", GGUF_I32), gb_u32(&b, (uint32_t)-2000000000);
	gb_key(&b, "i32pos", GGUF_I32), gb_u32(&b, 77);
	gb_key(&b, "f32", GGUF_F32), gb_f32(&b, 1.5f);
	gb_key(&b, "t", GGUF_BOOL), gb_u8(&b, 1);
	gb_key(&b, "f", GGUF_BOOL), gb_u8(&b, 0);
	gb_kv_str(&b, "s", "hello");
	gb_key(&b, "u64", GGUF_U64), gb_u64(&b, (1ull << 63) + 5);
	gb_key(&b, "i64", GGUF_I64), gb_u64(&b, (uint64_t)-(1ll << 62));
	gb_key(&b, "f64", GGUF_F64), gb_f64(&b, 3.25);
	gb_kv_str(&b, "empty", "");
	struct gguf *g = parse_ok(&b);

	cr_assert_eq(g->version, 3);
	cr_assert_eq(g->n_kv, 15);
	cr_assert_eq(g->n_tensors, 0);
	cr_assert_eq(g->alignment, 32);
	cr_assert_eq(g->kv[0].val.type, GGUF_U8);
	cr_assert_eq(g->kv[0].val.u, 200);
	cr_assert_eq(g->kv[1].val.i, -5);
	cr_assert_eq(g->kv[2].val.u, 60000);
	cr_assert_eq(g->kv[3].val.i, -30000);
	cr_assert_eq(g->kv[4].val.u, 4000000000u);
	cr_assert_eq(g->kv[5].val.i, -2000000000);
	cr_assert_eq(g->kv[7].val.f, 1.5);
	cr_assert_eq(g->kv[11].val.u, (1ull << 63) + 5);
	cr_assert_eq(g->kv[12].val.i, -(1ll << 62));
	cr_assert_eq(g->kv[13].val.f, 3.25);

	uint64_t u;
	double f;
	bool t;
	struct gguf_str s;
	cr_assert_eq(gguf_get_u64(g, "u8", &u), 0); cr_assert_eq(u, 200);
	cr_assert_eq(gguf_get_u64(g, "u16", &u), 0); cr_assert_eq(u, 60000);
	cr_assert_eq(gguf_get_u64(g, "u32", &u), 0); cr_assert_eq(u, 4000000000u);
	cr_assert_eq(gguf_get_u64(g, "u64", &u), 0); cr_assert_eq(u, (1ull << 63) + 5);
	cr_assert_eq(gguf_get_u64(g, "i32pos", &u), 0); cr_assert_eq(u, 77);
	cr_assert_eq(gguf_get_u64(g, "i8", &u), ERR_INVAL);
	cr_assert(strstr(err_msg(), "t.gguf: key 'i8'"), "%s", err_msg());
	cr_assert_eq(gguf_get_u64(g, "f32", &u), ERR_INVAL);
	cr_assert_eq(gguf_get_u64(g, "t", &u), ERR_INVAL);
	cr_assert_eq(gguf_get_u64(g, "s", &u), ERR_INVAL);
	cr_assert(strstr(err_msg(), "type string"), "%s", err_msg());
	cr_assert_eq(gguf_get_u64(g, "nope", &u), ERR_NOTFOUND);
	cr_assert(strstr(err_msg(), "t.gguf: key 'nope': not found"), "%s", err_msg());

	cr_assert_eq(gguf_get_f64(g, "f32", &f), 0); cr_assert_eq(f, 1.5);
	cr_assert_eq(gguf_get_f64(g, "f64", &f), 0); cr_assert_eq(f, 3.25);
	cr_assert_eq(gguf_get_f64(g, "i16", &f), 0); cr_assert_eq(f, -30000.0);
	cr_assert_eq(gguf_get_f64(g, "i64", &f), 0); cr_assert_eq(f, -4611686018427387904.0);
	cr_assert_eq(gguf_get_f64(g, "u16", &f), 0); cr_assert_eq(f, 60000.0);
	cr_assert_eq(gguf_get_f64(g, "s", &f), ERR_INVAL);
	cr_assert_eq(gguf_get_f64(g, "t", &f), ERR_INVAL);

	cr_assert_eq(gguf_get_bool(g, "t", &t), 0); cr_assert(t);
	cr_assert_eq(gguf_get_bool(g, "f", &t), 0); cr_assert(!t);
	cr_assert_eq(gguf_get_bool(g, "u8", &t), ERR_INVAL);

	cr_assert_eq(gguf_get_str(g, "s", &s), 0);
	cr_assert_eq(s.len, 5);
	cr_assert_eq(memcmp(s.ptr, "hello", 5), 0);
	cr_assert_eq(gguf_get_str(g, "empty", &s), 0); cr_assert_eq(s.len, 0);
	cr_assert_eq(gguf_get_str(g, "u8", &s), ERR_INVAL);
	const struct gguf_array *a;
	cr_assert_eq(gguf_get_arr(g, "s", &a), ERR_INVAL);
	cr_assert_eq(gguf_get_arr(g, "missing", &a), ERR_NOTFOUND);

	/* Lookup covers every key (sorted index) and rejects prefixes. */
	for (uint64_t i = 0; i < g->n_kv; i++) {
		char key[32];
		snprintf(key, sizeof key, "%.*s", (int)g->kv[i].key.len, g->kv[i].key.ptr);
		cr_assert_eq(gguf_find(g, key), &g->kv[i], "key %s", key);
	}
	cr_assert_null(gguf_find(g, "u"));
	cr_assert_null(gguf_find(g, "u644"));
	cr_assert_null(gguf_find(g, ""));
	free_parsed(g);
	gb_free(&b);
}

Test(gguf, arrays)
{
	struct gb b = {0};
	gb_hdr(&b, 3, 0, 9);
	gb_key(&b, "a.u8", GGUF_ARRAY), gb_u32(&b, GGUF_U8), gb_u64(&b, 3);
	gb_u8(&b, 1), gb_u8(&b, 2), gb_u8(&b, 255);
	gb_key(&b, "a.i16", GGUF_ARRAY), gb_u32(&b, GGUF_I16), gb_u64(&b, 2);
	gb_u16(&b, (uint16_t)-7), gb_u16(&b, 300);
	gb_key(&b, "a.f32", GGUF_ARRAY), gb_u32(&b, GGUF_F32), gb_u64(&b, 2);
	gb_f32(&b, -0.25f), gb_f32(&b, 1e6f);
	gb_key(&b, "a.f64", GGUF_ARRAY), gb_u32(&b, GGUF_F64), gb_u64(&b, 1);
	gb_f64(&b, 2.5);
	gb_key(&b, "a.bool", GGUF_ARRAY), gb_u32(&b, GGUF_BOOL), gb_u64(&b, 3);
	gb_u8(&b, 1), gb_u8(&b, 0), gb_u8(&b, 1);
	gb_key(&b, "a.u64", GGUF_ARRAY), gb_u32(&b, GGUF_U64), gb_u64(&b, 2);
	gb_u64(&b, 42), gb_u64(&b, UINT64_MAX);
	gb_key(&b, "a.str", GGUF_ARRAY), gb_u32(&b, GGUF_STRING), gb_u64(&b, 3);
	gb_str(&b, "a"), gb_str(&b, ""), gb_str(&b, "hello world");
	/* [[1u32, 2u32], ["x"]] */
	gb_key(&b, "a.nested", GGUF_ARRAY), gb_u32(&b, GGUF_ARRAY), gb_u64(&b, 2);
	gb_u32(&b, GGUF_U32), gb_u64(&b, 2), gb_u32(&b, 1), gb_u32(&b, 2);
	gb_u32(&b, GGUF_STRING), gb_u64(&b, 1), gb_str(&b, "x");
	gb_key(&b, "a.empty", GGUF_ARRAY), gb_u32(&b, GGUF_STRING), gb_u64(&b, 0);
	struct gguf *g = parse_ok(&b);
	const struct gguf_array *a;
	double f;
	int64_t i;
	struct gguf_str s;

	cr_assert_eq(gguf_get_arr(g, "a.u8", &a), 0);
	cr_assert_eq(a->type, GGUF_U8);
	cr_assert_eq(a->n, 3);
	cr_assert_null(a->offsets);
	cr_assert_eq(gguf_arr_i64(a, 2, &i), 0); cr_assert_eq(i, 255);
	cr_assert_eq(gguf_arr_f64(a, 1, &f), 0); cr_assert_eq(f, 2.0);
	cr_assert_eq(gguf_arr_i64(a, 3, &i), ERR_RANGE);
	cr_assert_eq(gguf_arr_str(a, 0, &s), ERR_INVAL);

	cr_assert_eq(gguf_get_arr(g, "a.i16", &a), 0);
	cr_assert_eq(gguf_arr_i64(a, 0, &i), 0); cr_assert_eq(i, -7);
	cr_assert_eq(gguf_arr_f64(a, 1, &f), 0); cr_assert_eq(f, 300.0);

	cr_assert_eq(gguf_get_arr(g, "a.f32", &a), 0);
	cr_assert_eq(gguf_arr_f64(a, 0, &f), 0); cr_assert_eq(f, -0.25);
	cr_assert_eq(gguf_arr_f64(a, 1, &f), 0); cr_assert_eq(f, 1e6);
	cr_assert_eq(gguf_arr_i64(a, 0, &i), ERR_INVAL);

	cr_assert_eq(gguf_get_arr(g, "a.f64", &a), 0);
	cr_assert_eq(gguf_arr_f64(a, 0, &f), 0); cr_assert_eq(f, 2.5);

	cr_assert_eq(gguf_get_arr(g, "a.bool", &a), 0);
	cr_assert_eq(gguf_arr_i64(a, 0, &i), 0); cr_assert_eq(i, 1);
	cr_assert_eq(gguf_arr_i64(a, 1, &i), 0); cr_assert_eq(i, 0);
	cr_assert_eq(gguf_arr_f64(a, 0, &f), ERR_INVAL);

	cr_assert_eq(gguf_get_arr(g, "a.u64", &a), 0);
	cr_assert_eq(gguf_arr_i64(a, 0, &i), 0); cr_assert_eq(i, 42);
	cr_assert_eq(gguf_arr_i64(a, 1, &i), ERR_RANGE);
	cr_assert_eq(gguf_arr_f64(a, 1, &f), 0); cr_assert_eq(f, 18446744073709551615.0);

	cr_assert_eq(gguf_get_arr(g, "a.str", &a), 0);
	cr_assert_eq(a->type, GGUF_STRING);
	cr_assert_eq(a->n, 3);
	cr_assert_not_null(a->offsets);
	cr_assert_eq(a->offsets[0], 0);
	cr_assert_eq(a->offsets[1], 9);
	cr_assert_eq(a->offsets[2], 17);
	cr_assert_eq(a->offsets[3], 36);
	cr_assert_eq(gguf_arr_str(a, 0, &s), 0);
	cr_assert_eq(s.len, 1); cr_assert_eq(s.ptr[0], 'a');
	cr_assert_eq(gguf_arr_str(a, 1, &s), 0); cr_assert_eq(s.len, 0);
	cr_assert_eq(gguf_arr_str(a, 2, &s), 0);
	cr_assert_eq(s.len, 11); cr_assert_eq(memcmp(s.ptr, "hello world", 11), 0);
	cr_assert_eq(gguf_arr_str(a, 3, &s), ERR_RANGE);
	cr_assert_eq(gguf_arr_f64(a, 0, &f), ERR_INVAL);
	cr_assert_eq(gguf_arr_i64(a, 0, &i), ERR_INVAL);

	/* Nested: offsets point at each element's (type, count) header. */
	cr_assert_eq(gguf_get_arr(g, "a.nested", &a), 0);
	cr_assert_eq(a->type, GGUF_ARRAY);
	cr_assert_eq(a->n, 2);
	cr_assert_not_null(a->offsets);
	cr_assert_eq(a->offsets[0], 0);
	cr_assert_eq(a->offsets[1], 4 + 8 + 2 * 4);
	cr_assert_eq(a->offsets[2], 20 + 4 + 8 + 8 + 1);
	cr_assert_eq(a->data[a->offsets[1]], GGUF_STRING);
	cr_assert_eq(gguf_arr_str(a, 0, &s), ERR_INVAL);
	cr_assert_eq(gguf_arr_i64(a, 0, &i), ERR_INVAL);

	cr_assert_eq(gguf_get_arr(g, "a.empty", &a), 0);
	cr_assert_eq(a->n, 0);
	cr_assert_eq(gguf_arr_str(a, 0, &s), ERR_RANGE);

	cr_assert_str_eq(gguf_vtype_name(GGUF_BOOL), "bool");
	cr_assert_str_eq(gguf_vtype_name(99), "unknown");
	cr_assert_eq(gguf_vtype_size(GGUF_I16), 2);
	cr_assert_eq(gguf_vtype_size(GGUF_F64), 8);
	cr_assert_eq(gguf_vtype_size(GGUF_STRING), 0);
	free_parsed(g);
	gb_free(&b);
}

/* Two tensors, the explicit alignment 64 and a distinct byte in each. */
Test(gguf, alignment_64_and_tensor_data)
{
	struct gb b = {0};
	gb_hdr(&b, 3, 3, 2);
	gb_kv_str(&b, "general.architecture", "test");
	gb_kv_u32(&b, "general.alignment", 64);
	gb_tinfo(&b, "w.q8", 2, (uint64_t[]){32, 2}, TENSOR_Q8_0, 0);      /* 68 bytes */
	gb_tinfo(&b, "w.f32", 3, (uint64_t[]){3, 1, 2}, TENSOR_F32, 128);  /* 24 bytes */
	gb_tinfo(&b, "w.f16", 4, (uint64_t[]){2, 1, 1, 1}, TENSOR_F16, 192); /* 4 bytes */
	size_t infos_end = b.n;
	gb_pad(&b, 64);
	size_t data = b.n;
	gb_fill(&b, 68, 1);
	gb_pad(&b, 64);
	gb_fill(&b, 24, 2);
	gb_pad(&b, 64);
	gb_fill(&b, 4, 3);
	struct gguf *g = parse_ok(&b);
	cr_assert_eq(g->alignment, 64);
	cr_assert_eq(g->data_offset, data);
	cr_assert_eq(g->data_offset % 64, 0);
	cr_assert_geq(g->data_offset, infos_end);
	cr_assert_lt(g->data_offset, infos_end + 64);

	const struct gguf_tensor *t = gguf_find_tensor(g, "w.q8");
	cr_assert_not_null(t);
	cr_assert_eq(t->n_dims, 2);
	cr_assert_eq(t->ne[0], 32); cr_assert_eq(t->ne[1], 2); cr_assert_eq(t->ne[2], 1); cr_assert_eq(t->ne[3], 1);
	cr_assert_eq(t->type, TENSOR_Q8_0);
	cr_assert_eq(t->nbytes, 68);
	cr_assert_eq(t->data, g->base + data);
	cr_assert_eq(t->data[67], 1);
	t = gguf_find_tensor(g, "w.f32");
	cr_assert_not_null(t);
	cr_assert_eq(t->nbytes, 24);
	cr_assert_eq(t->ne[2], 2); cr_assert_eq(t->ne[3], 1);
	cr_assert_eq(t->data[0], 2);
	cr_assert_eq(t->data[23], 2);
	t = gguf_find_tensor(g, "w.f16");
	cr_assert_not_null(t);
	cr_assert_eq(t->n_dims, 4);
	cr_assert_eq(t->nbytes, 4);
	cr_assert_eq(t->data + 4, g->base + g->size);
	cr_assert_null(gguf_find_tensor(g, "w"));
	cr_assert_null(gguf_find_tensor(g, "w.f32x"));
	cr_assert_null(gguf_find_tensor(g, "an absurdly long tensor name that cannot exist in any gguf file at all"));
	free_parsed(g);
	gb_free(&b);
}

Test(gguf, v2_file_default_alignment)
{
	struct gb b = {0};
	gb_hdr(&b, 2, 1, 1);
	gb_kv_u32(&b, "k", 5);
	gb_tinfo(&b, "x", 1, (uint64_t[]){8}, TENSOR_F32, 0);
	size_t infos_end = b.n;
	gb_pad(&b, 32);
	gb_fill(&b, 32, 9);
	struct gguf *g = parse_ok(&b);
	cr_assert_eq(g->version, 2);
	cr_assert_eq(g->alignment, 32);
	cr_assert_eq(g->data_offset, (infos_end + 31) / 32 * 32);
	cr_assert_eq(g->tensors[0].nbytes, 32);
	cr_assert_eq(g->tensors[0].data, g->base + g->data_offset);
	cr_assert_eq(g->mapped, 0);
	free_parsed(g);
	gb_free(&b);
}

Test(gguf, alignment_1_and_unpadded_tensorless_file)
{
	struct gb b = {0};
	gb_hdr(&b, 3, 1, 1);
	gb_kv_u32(&b, "general.alignment", 1);
	gb_tinfo(&b, "x", 1, (uint64_t[]){1}, TENSOR_F16, 0);
	size_t end = b.n;
	gb_u16(&b, 0x3c00);
	struct gguf *g = parse_ok(&b);
	cr_assert_eq(g->alignment, 1);
	cr_assert_eq(g->data_offset, end);
	free_parsed(g);
	gb_free(&b);

	/* No tensors and no final padding (like vocab-only files). */
	gb_hdr(&b, 3, 0, 1);
	gb_kv_str(&b, "abc", "d");
	cr_assert_neq(b.n % 32, 0);
	g = parse_ok(&b);
	cr_assert_eq(g->data_offset, b.n);
	free_parsed(g);
	gb_free(&b);
}

Test(gguf, max_lengths_accepted)
{
	char key[65536];
	memset(key, 'k', 65535);
	key[65535] = 0;
	char name[GGUF_MAX_NAME + 1];
	memset(name, 'n', GGUF_MAX_NAME);
	name[GGUF_MAX_NAME] = 0;
	struct gb b = {0};
	gb_hdr(&b, 3, 1, 1);
	gb_kv_u32(&b, key, 1);
	gb_tinfo(&b, name, 1, (uint64_t[]){1}, TENSOR_F32, 0);
	gb_pad(&b, 32);
	gb_fill(&b, 4, 0);
	struct gguf *g = parse_ok(&b);
	cr_assert_not_null(gguf_find(g, key));
	cr_assert_not_null(gguf_find_tensor(g, name));
	cr_assert_eq(strlen(g->tensors[0].name), GGUF_MAX_NAME);
	free_parsed(g);
	gb_free(&b);
}

/* 262144 strings (a Gemma 3 vocabulary) must parse quickly with O(1) access. */
Test(gguf, big_string_array_fast)
{
	const uint64_t n = 262144;
	struct gb b = {0};
	gb_hdr(&b, 3, 0, 1);
	gb_key(&b, "tokenizer.ggml.tokens", GGUF_ARRAY);
	gb_u32(&b, GGUF_STRING);
	gb_u64(&b, n);
	for (uint64_t i = 0; i < n; i++) {
		char s[32];
		snprintf(s, sizeof s, "tok%llu", (unsigned long long)i);
		gb_str(&b, s);
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct gguf *g = parse_ok(&b);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	cr_assert_lt(ms, 1000.0, "parse took %.1f ms", ms); /* ~2 ms unoptimized; generous for sanitizers */
	const struct gguf_array *a;
	cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.tokens", &a), 0);
	cr_assert_eq(a->n, n);
	struct gguf_str s;
	const uint64_t probe[] = {0, 1, 9999, 200000, n - 1};
	for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++) {
		char want[32];
		snprintf(want, sizeof want, "tok%llu", (unsigned long long)probe[k]);
		cr_assert_eq(gguf_arr_str(a, probe[k], &s), 0);
		cr_assert_eq(s.len, strlen(want));
		cr_assert_eq(memcmp(s.ptr, want, s.len), 0);
	}
	free_parsed(g);
	gb_free(&b);
}

Test(gguf, open_file_and_errors)
{
	struct gguf *g = (struct gguf *)1;
	cr_assert_eq(gguf_open("/nonexistent/dir/x.gguf", &g), ERR_NOTFOUND);
	cr_assert_null(g);
	cr_assert(strstr(err_msg(), "/nonexistent/dir/x.gguf"), "%s", err_msg());

	char path[] = "/tmp/unicorn-test-gguf-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	g = (struct gguf *)1;
	cr_assert_eq(gguf_open(path, &g), ERR_INVAL);
	cr_assert_null(g);
	cr_assert(strstr(err_msg(), path) && strstr(err_msg(), "empty"), "%s", err_msg());

	struct gb b = {0};
	gb_hdr(&b, 3, 1, 1);
	gb_kv_u32(&b, "general.alignment", 32);
	gb_tinfo(&b, "x", 1, (uint64_t[]){4}, TENSOR_F32, 0);
	gb_pad(&b, 32);
	gb_fill(&b, 16, 7);
	cr_assert_eq(write(fd, b.b, b.n), (ssize_t)b.n);
	close(fd);
	cr_assert_eq(gguf_open(path, &g), 0, "%s", err_msg());
	cr_assert_eq(g->mapped, 1);
	cr_assert_str_eq(g->path, path);
	cr_assert_eq(g->size, b.n);
	cr_assert_eq(g->tensors[0].data[15], 7);
	gguf_close(g);

	/* A bad file: the message names the path. */
	fd = open(path, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "GGUF\x01\0\0\0", 8), 8);
	close(fd);
	cr_assert_eq(gguf_open(path, &g), ERR_UNSUP);
	cr_assert(strstr(err_msg(), path) && strstr(err_msg(), "version 1"), "%s", err_msg());
	cr_assert_eq(gguf_open("/tmp", &g), ERR_IO);
	unlink(path);
	gb_free(&b);
	gguf_close(NULL);
}

/* ---- negative: header ------------------------------------------------- */

Test(gguf, rejects_bad_magic)
{
	struct gb b = {0};
	gb_raw(&b, "GGUX", 4);
	gb_u32(&b, 3), gb_u64(&b, 0), gb_u64(&b, 0);
	expect_fail(&b, ERR_INVAL, "bad magic");
	gb_free(&b);
}

Test(gguf, rejects_empty_and_tiny)
{
	struct gb b = {0};
	expect_fail(&b, ERR_INVAL, "empty");
	gb_raw(&b, "GG", 2);
	expect_fail(&b, ERR_RANGE, "truncated");
	gb_free(&b);
}

Test(gguf, rejects_version)
{
	const uint32_t bad[] = {0, 1, 4, 0x03000000};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct gb b = {0};
		gb_hdr(&b, bad[i], 0, 0);
		char want[32];
		snprintf(want, sizeof want, "version %u", bad[i]);
		expect_fail(&b, ERR_UNSUP, want);
		gb_free(&b);
	}
}

Test(gguf, rejects_counts_over_caps)
{
	struct gb b = {0};
	gb_hdr(&b, 3, (uint64_t)GGUF_MAX_TENSORS + 1, 0);
	expect_fail(&b, ERR_RANGE, "tensor count");
	gb_free(&b);
	gb_hdr(&b, 3, 0, (uint64_t)GGUF_MAX_KV + 1);
	expect_fail(&b, ERR_RANGE, "kv count");
	gb_free(&b);
	gb_hdr(&b, 3, UINT64_MAX, UINT64_MAX);
	expect_fail(&b, ERR_RANGE, "exceeds the limit");
	gb_free(&b);
	/* Within the caps but more than the file could hold: no huge allocation. */
	gb_hdr(&b, 3, GGUF_MAX_TENSORS, GGUF_MAX_KV);
	expect_fail(&b, ERR_RANGE, "truncated");
	gb_free(&b);
}

/* Every proper prefix of a valid file must be rejected as truncated. */
Test(gguf, rejects_truncation_everywhere)
{
	struct gb b = {0};
	gb_hdr(&b, 3, 2, 6);
	gb_kv_str(&b, "general.architecture", "gemma3");
	gb_key(&b, "f", GGUF_F32), gb_f32(&b, 1.0f);
	gb_key(&b, "b", GGUF_BOOL), gb_u8(&b, 1);
	gb_key(&b, "a", GGUF_ARRAY), gb_u32(&b, GGUF_STRING), gb_u64(&b, 2), gb_str(&b, "xy"), gb_str(&b, "z");
	gb_key(&b, "n", GGUF_ARRAY), gb_u32(&b, GGUF_ARRAY), gb_u64(&b, 1);
	gb_u32(&b, GGUF_I16), gb_u64(&b, 2), gb_u16(&b, 1), gb_u16(&b, 2);
	gb_key(&b, "u", GGUF_U64), gb_u64(&b, 7);
	gb_tinfo(&b, "a", 2, (uint64_t[]){4, 2}, TENSOR_F32, 0);
	gb_tinfo(&b, "b", 1, (uint64_t[]){32}, TENSOR_Q4_0, 32);
	size_t infos_end = b.n;
	gb_pad(&b, 32);
	gb_fill(&b, 32 + 18, 1);
	struct gguf *g = parse_ok(&b);
	free_parsed(g);
	for (size_t n = 1; n < b.n; n++) {
		g = (struct gguf *)1;
		err_clear();
		int rc = parse_n(&b, n, &g);
		cr_assert_eq(rc, ERR_RANGE, "prefix %zu: rc %d %s", n, rc, err_msg());
		cr_assert_null(g);
		cr_assert(strstr(err_msg(), "t.gguf: "), "prefix %zu: %s", n, err_msg());
		if (n < infos_end)
			cr_assert(strstr(err_msg(), "truncated"), "prefix %zu: %s", n, err_msg());
	}
	gb_free(&b);
}

/* ---- negative: metadata ----------------------------------------------- */

Test(gguf, rejects_string_over_cap)
{
	struct gb b = {0};
	one_kv(&b, "s", GGUF_STRING);
	gb_u64(&b, (uint64_t)GGUF_MAX_STRING + 1);
	gb_fill(&b, 16, 'a');
	expect_fail(&b, ERR_RANGE, "key 's': string length 1048577 exceeds the limit");
	gb_free(&b);

	one_kv(&b, "sa", GGUF_ARRAY);
	gb_u32(&b, GGUF_STRING), gb_u64(&b, 2), gb_str(&b, "ok");
	gb_u64(&b, (uint64_t)GGUF_MAX_STRING + 1);
	gb_fill(&b, 16, 'a');
	expect_fail(&b, ERR_RANGE, "key 'sa': element 1: string length");
	gb_free(&b);
}

Test(gguf, rejects_array_over_cap)
{
	struct gb b = {0};
	one_kv(&b, "arr", GGUF_ARRAY);
	gb_u32(&b, GGUF_U8), gb_u64(&b, (uint64_t)GGUF_MAX_ARRAY + 1);
	gb_fill(&b, 64, 0);
	expect_fail(&b, ERR_RANGE, "key 'arr': array of 16777217 elements exceeds");
	gb_free(&b);
	/* Within the cap but longer than the file: rejected before allocating. */
	one_kv(&b, "arr", GGUF_ARRAY);
	gb_u32(&b, GGUF_STRING), gb_u64(&b, GGUF_MAX_ARRAY);
	gb_fill(&b, 64, 0);
	expect_fail(&b, ERR_RANGE, "truncated");
	gb_free(&b);
}

Test(gguf, rejects_key_too_long)
{
	struct gb b = {0};
	gb_hdr(&b, 3, 0, 1);
	gb_u64(&b, 65536);
	gb_fill(&b, 65536, 'k');
	gb_u32(&b, GGUF_U8), gb_u8(&b, 0);
	expect_fail(&b, ERR_RANGE, "kv 0 key: string length 65536 exceeds the limit 65535");
	gb_free(&b);
}

Test(gguf, rejects_bool_not_0_or_1)
{
	struct gb b = {0};
	one_kv(&b, "flag", GGUF_BOOL);
	gb_u8(&b, 2);
	expect_fail(&b, ERR_INVAL, "key 'flag': bool value 2 is not 0 or 1");
	gb_free(&b);
	one_kv(&b, "flags", GGUF_ARRAY);
	gb_u32(&b, GGUF_BOOL), gb_u64(&b, 3), gb_u8(&b, 0), gb_u8(&b, 1), gb_u8(&b, 255);
	expect_fail(&b, ERR_INVAL, "key 'flags': element 2: bool value 255");
	gb_free(&b);
}

Test(gguf, rejects_unknown_value_type)
{
	struct gb b = {0};
	one_kv(&b, "x", 13);
	gb_u64(&b, 0);
	expect_fail(&b, ERR_INVAL, "key 'x': unknown value type 13");
	gb_free(&b);
	one_kv(&b, "y", GGUF_ARRAY);
	gb_u32(&b, 0xffffffffu), gb_u64(&b, 1), gb_u64(&b, 0);
	expect_fail(&b, ERR_INVAL, "key 'y': unknown array element type 4294967295");
	gb_free(&b);
}

Test(gguf, rejects_deep_nesting)
{
	struct gb b = {0};
	one_kv(&b, "deep", GGUF_ARRAY);
	for (int i = 0; i < 100; i++)
		gb_u32(&b, GGUF_ARRAY), gb_u64(&b, 1);
	gb_u32(&b, GGUF_U8), gb_u64(&b, 0);
	expect_fail(&b, ERR_UNSUP, "nested deeper");
	gb_free(&b);
}

Test(gguf, rejects_duplicate_keys)
{
	struct gb b = {0};
	gb_hdr(&b, 3, 0, 3);
	gb_kv_u32(&b, "a.b", 1);
	gb_kv_u32(&b, "c", 2);
	gb_kv_str(&b, "a.b", "again");
	expect_fail(&b, ERR_INVAL, "key 'a.b': duplicate key");
	gb_free(&b);
}

Test(gguf, rejects_bad_alignment)
{
	const uint32_t bad[] = {0, 3, 48, GGUF_MAX_ALIGNMENT * 2, 0x80000000u};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct gb b = {0};
		gb_hdr(&b, 3, 0, 1);
		gb_kv_u32(&b, "general.alignment", bad[i]);
		char want[64];
		snprintf(want, sizeof want, "general.alignment': %u is not a power of two", bad[i]);
		expect_fail(&b, ERR_INVAL, want);
		gb_free(&b);
	}
	struct gb b = {0};
	gb_hdr(&b, 3, 0, 1);
	gb_key(&b, "general.alignment", GGUF_U64), gb_u64(&b, 32);
	expect_fail(&b, ERR_INVAL, "general.alignment': type u64, expected u32");
	gb_free(&b);
}

/* ---- negative: tensors ------------------------------------------------ */

Test(gguf, rejects_n_dims)
{
	expect_tensor_fail(&(struct tspec){"w", 0, {1}, TENSOR_F32, 0}, 1, 64, ERR_INVAL,
			   "tensor 'w': n_dims 0 not in 1..4");
	expect_tensor_fail(&(struct tspec){"w", 5, {1, 1, 1, 1}, TENSOR_F32, 0}, 1, 64, ERR_INVAL,
			   "tensor 'w': n_dims 5 not in 1..4");
}

Test(gguf, rejects_zero_dim)
{
	expect_tensor_fail(&(struct tspec){"w", 3, {4, 0, 2}, TENSOR_F32, 0}, 1, 64, ERR_INVAL,
			   "tensor 'w': dimension 1 is 0");
}

Test(gguf, rejects_dim_product_overflow)
{
	expect_tensor_fail(&(struct tspec){"w", 2, {1ull << 32, 1ull << 32}, TENSOR_F32, 0}, 1, 64, ERR_RANGE,
			   "tensor 'w': element count overflows");
	expect_tensor_fail(&(struct tspec){"w", 1, {UINT64_MAX}, TENSOR_F32, 0}, 1, 64, ERR_RANGE,
			   "element count overflows");
}

Test(gguf, rejects_size_overflow)
{
	/* 2^62 elements fit in int64 but 2^64 bytes do not fit in u64. */
	expect_tensor_fail(&(struct tspec){"w", 2, {1ull << 31, 1ull << 31}, TENSOR_F32, 0}, 1, 64, ERR_RANGE,
			   "tensor 'w': byte size overflows");
}

Test(gguf, rejects_unsupported_type)
{
	expect_tensor_fail(&(struct tspec){"w", 1, {32}, 16 /* iq2_xxs */, 0}, 1, 64, ERR_UNSUP,
			   "tensor 'w' is IQ2_XXS (type 16), which Unicorn cannot run yet; it runs F32, F16, BF16, Q8_0");
	expect_tensor_fail(&(struct tspec){"w", 1, {32}, 9999, 0}, 1, 64, ERR_UNSUP,
			   "tensor 'w' has unknown type 9999 (not a ggml type)");
	expect_tensor_fail(&(struct tspec){"w", 1, {32}, 4 /* removed Q4_2 */, 0}, 1, 64, ERR_UNSUP,
			   "has unknown type 4");
}

/* The mixed-preset types are accepted with their ggml byte sizes (two rows
 * each, back to back at 32-byte aligned offsets). */
Test(gguf, accepts_preset_types)
{
	static const struct { uint32_t type; uint64_t ne0, bytes; } ty[] = {
		{ TENSOR_Q4_1, 64, 80 },   { TENSOR_Q5_0, 64, 88 },   { TENSOR_Q5_1, 64, 96 },
		{ TENSOR_IQ4_NL, 64, 72 }, { TENSOR_Q2_K, 256, 168 }, { TENSOR_Q3_K, 256, 220 },
		{ TENSOR_Q5_K, 256, 352 }, { TENSOR_IQ4_XS, 256, 272 },
	};
	enum { N = sizeof ty / sizeof ty[0] };
	struct tspec t[N];
	static const char *names[N] = { "a", "b", "c", "d", "e", "f", "g", "h" };
	uint64_t off = 0;
	for (int i = 0; i < N; i++) {
		t[i] = (struct tspec){ names[i], 2, { ty[i].ne0, 2 }, ty[i].type, off };
		off += (ty[i].bytes + 31) / 32 * 32;
	}
	struct gb b = {0};
	tensor_file(&b, t, N, off);
	struct gguf *g = parse_ok(&b);
	cr_assert_eq(g->n_tensors, N);
	for (int i = 0; i < N; i++)
		cr_assert_eq(g->tensors[i].nbytes, ty[i].bytes, "type %u", ty[i].type);
	free_parsed(g);
	gb_free(&b);
	/* K and IQ4_XS rows must be whole 256-element blocks */
	expect_tensor_fail(&(struct tspec){"w", 1, {128}, TENSOR_Q5_K, 0}, 1, 256, ERR_INVAL,
			   "not a multiple of the q5_K block size 256");
	expect_tensor_fail(&(struct tspec){"w", 1, {128}, TENSOR_IQ4_XS, 0}, 1, 256, ERR_INVAL,
			   "not a multiple of the iq4_xs block size 256");
}

Test(gguf, rejects_row_not_multiple_of_block)
{
	expect_tensor_fail(&(struct tspec){"w", 2, {48, 2}, TENSOR_Q8_0, 0}, 1, 256, ERR_INVAL,
			   "tensor 'w': ne[0] = 48 is not a multiple of the q8_0 block size 32");
	expect_tensor_fail(&(struct tspec){"k", 1, {512 + 32}, TENSOR_Q4_K, 0}, 1, 1024, ERR_INVAL,
			   "block size 256");
}

Test(gguf, rejects_unaligned_offset)
{
	const struct tspec t[] = {
		{"blk.0.attn_q.weight", 1, {4}, TENSOR_F32, 0},
		{"blk.0.attn_k.weight", 1, {4}, TENSOR_F32, 48},
	};
	expect_tensor_fail(t, 2, 128, ERR_INVAL, "t.gguf: tensor 'blk.0.attn_k.weight': offset 48 not aligned to 32");
}

Test(gguf, rejects_data_outside_file)
{
	expect_tensor_fail(&(struct tspec){"w", 1, {16}, TENSOR_F32, 0}, 1, 63, ERR_RANGE,
			   "tensor 'w': data at offset 0 size 64 lies outside");
	expect_tensor_fail(&(struct tspec){"w", 1, {4}, TENSOR_F32, 64}, 1, 64, ERR_RANGE, "lies outside");
	expect_tensor_fail(&(struct tspec){"w", 1, {4}, TENSOR_F32, UINT64_MAX - 31}, 1, 64, ERR_RANGE,
			   "lies outside");
	/* Tensors but no data section at all (file ends inside the padding). */
	struct gb b = {0};
	gb_hdr(&b, 3, 1, 0);
	gb_tinfo(&b, "w", 1, (uint64_t[]){1}, TENSOR_F32, 0);
	cr_assert_neq(b.n % 32, 0);
	expect_fail(&b, ERR_RANGE, "past the end");
	gb_free(&b);
}

Test(gguf, rejects_overlapping_tensors)
{
	/* Listed out of offset order so that the check must sort. */
	const struct tspec t[] = {
		{"c", 1, {8}, TENSOR_F32, 256},
		{"a", 1, {32}, TENSOR_F32, 0},   /* [0, 128) */
		{"b", 1, {8}, TENSOR_F32, 96},   /* [96, 128) */
	};
	expect_tensor_fail(t, 3, 512, ERR_INVAL, "tensor 'b': data [96, 128) overlaps tensor 'a' [0, 128)");
	const struct tspec same[] = {
		{"x", 1, {8}, TENSOR_F32, 32},
		{"y", 1, {8}, TENSOR_F32, 32},
	};
	expect_tensor_fail(same, 2, 128, ERR_INVAL, "overlaps");
	/* Touching is fine. */
	struct gb b = {0};
	const struct tspec ok[] = {
		{"b", 1, {8}, TENSOR_F32, 32},
		{"a", 1, {8}, TENSOR_F32, 0},
	};
	tensor_file(&b, ok, 2, 64);
	struct gguf *g = parse_ok(&b);
	cr_assert_eq(g->n_tensors, 2);
	cr_assert_str_eq(g->tensors[1].name, "a");
	free_parsed(g);
	gb_free(&b);
}

Test(gguf, rejects_duplicate_tensor_names)
{
	const struct tspec t[] = {
		{"w", 1, {8}, TENSOR_F32, 0},
		{"v", 1, {8}, TENSOR_F32, 32},
		{"w", 1, {8}, TENSOR_F32, 64},
	};
	expect_tensor_fail(t, 3, 96, ERR_INVAL, "tensor 'w': duplicate tensor name");
}

Test(gguf, rejects_tensor_name_too_long)
{
	char name[GGUF_MAX_NAME + 2];
	memset(name, 'n', GGUF_MAX_NAME + 1);
	name[GGUF_MAX_NAME + 1] = 0;
	expect_tensor_fail(&(struct tspec){name, 1, {8}, TENSOR_F32, 0}, 1, 32, ERR_RANGE,
			   "tensor 0: name length 65 exceeds 64 bytes");
	struct gb b = {0};
	gb_hdr(&b, 3, 1, 0);
	gb_u64(&b, 3), gb_raw(&b, "a\0b", 3);
	gb_u32(&b, 1), gb_u64(&b, 8), gb_u32(&b, TENSOR_F32), gb_u64(&b, 0);
	gb_pad(&b, 32);
	gb_fill(&b, 32, 0);
	expect_fail(&b, ERR_INVAL, "name contains a NUL byte");
	gb_free(&b);
}

/* ---- real files ------------------------------------------------------- */

static void check_golden(const char *enc, uint32_t matrix_type)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/golden/gemma3-tiny-%s.gguf", golden_shared_dir(), enc);
	struct gguf *g;
	cr_assert_eq(gguf_open(path, &g), 0, "%s", err_msg());
	cr_assert_eq(g->version, 3);
	cr_assert_eq(g->alignment, 32);
	cr_assert_eq(g->data_offset % 32, 0);
	struct gguf_str s;
	cr_assert_eq(gguf_get_str(g, "general.architecture", &s), 0);
	cr_assert_eq(s.len, 6);
	cr_assert_eq(memcmp(s.ptr, "gemma3", 6), 0);
	uint64_t u;
	cr_assert_eq(gguf_get_u64(g, "gemma3.embedding_length", &u), 0); cr_assert_eq(u, 128);
	cr_assert_eq(gguf_get_u64(g, "gemma3.block_count", &u), 0); cr_assert_eq(u, 6);
	cr_assert_eq(gguf_get_u64(g, "gemma3.feed_forward_length", &u), 0); cr_assert_eq(u, 384);
	cr_assert_eq(gguf_get_u64(g, "gemma3.attention.head_count", &u), 0); cr_assert_eq(u, 4);
	cr_assert_eq(gguf_get_u64(g, "gemma3.attention.head_count_kv", &u), 0); cr_assert_eq(u, 2);
	cr_assert_eq(gguf_get_u64(g, "gemma3.attention.sliding_window", &u), 0); cr_assert_eq(u, 8);
	double f;
	cr_assert_eq(gguf_get_f64(g, "gemma3.attention.layer_norm_rms_epsilon", &f), 0);
	cr_assert_float_eq(f, 1e-6, 1e-12);
	cr_assert_eq(gguf_get_f64(g, "gemma3.rope.freq_base", &f), 0); cr_assert_eq(f, 1e6);
	const struct gguf_array *a;
	cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.tokens", &a), 0);
	cr_assert_eq(a->type, GGUF_STRING);
	cr_assert_eq(a->n, 32000);

	/* 6 layers x 13 tensors + token_embd + output_norm; tied output. */
	cr_assert_eq(g->n_tensors, 6 * 13 + 2);
	const struct gguf_tensor *t = gguf_find_tensor(g, "token_embd.weight");
	cr_assert_not_null(t);
	cr_assert_eq(t->n_dims, 2);
	cr_assert_eq(t->ne[0], 128);
	cr_assert_eq(t->ne[1], 32000);
	cr_assert_eq(t->type, matrix_type);
	uint64_t want;
	cr_assert_eq(quant_row_bytes(matrix_type, 128, &want), 0);
	cr_assert_eq(t->nbytes, want * 32000);
	cr_assert_null(gguf_find_tensor(g, "output.weight"));
	t = gguf_find_tensor(g, "blk.5.ffn_down.weight");
	cr_assert_not_null(t);
	cr_assert_eq(t->ne[0], 384); cr_assert_eq(t->ne[1], 128);
	cr_assert_eq(t->type, matrix_type);
	t = gguf_find_tensor(g, "blk.3.attn_k_norm.weight");
	cr_assert_not_null(t);
	cr_assert_eq(t->n_dims, 1); cr_assert_eq(t->ne[0], 32);
	cr_assert_eq(t->type, TENSOR_F32);
	cr_assert_eq(t->data, g->base + g->data_offset + t->offset);
	/* Norm weights are stored as 1 + w: finite, and not all zero. */
	float w[32];
	memcpy(w, t->data, sizeof w);
	float sum = 0;
	for (int i = 0; i < 32; i++) {
		cr_assert(isfinite(w[i]));
		sum += fabsf(w[i]);
	}
	cr_assert_gt(sum, 0);
	/* Every tensor is in bounds and findable by name. */
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *ti = &g->tensors[i];
		cr_assert_eq(gguf_find_tensor(g, ti->name), ti);
		cr_assert_leq(ti->data + ti->nbytes, g->base + g->size);
	}
	gguf_close(g);
}

Test(gguf, golden_f32)
{
	check_golden("f32", TENSOR_F32);
}

Test(gguf, golden_q4_0)
{
	check_golden("q4_0", TENSOR_Q4_0);
}

Test(gguf, golden_q8_0)
{
	check_golden("q8_0", TENSOR_Q8_0);
}

Test(gguf, llama_spm_vocab)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-llama-spm.gguf", golden_shared_dir());
	struct gguf *g;
	cr_assert_eq(gguf_open(path, &g), 0, "%s", err_msg());
	cr_assert_eq(g->n_tensors, 0);
	cr_assert_eq(g->data_offset, g->size);
	const struct gguf_array *tok, *scores, *types;
	cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.tokens", &tok), 0);
	cr_assert_eq(tok->type, GGUF_STRING);
	cr_assert_eq(tok->n, 32000);
	struct gguf_str s;
	cr_assert_eq(gguf_arr_str(tok, 0, &s), 0);
	cr_assert_eq(s.len, 5); cr_assert_eq(memcmp(s.ptr, "<unk>", 5), 0);
	cr_assert_eq(gguf_arr_str(tok, 1, &s), 0);
	cr_assert_eq(s.len, 3); cr_assert_eq(memcmp(s.ptr, "<s>", 3), 0);
	cr_assert_eq(gguf_arr_str(tok, 3, &s), 0);
	cr_assert_eq(s.len, 6); cr_assert_eq(memcmp(s.ptr, "<0x00>", 6), 0);
	cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.scores", &scores), 0);
	cr_assert_eq(scores->type, GGUF_F32);
	cr_assert_eq(scores->n, 32000);
	cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.token_type", &types), 0);
	cr_assert_eq(types->type, GGUF_I32);
	int64_t ty;
	cr_assert_eq(gguf_arr_i64(types, 1, &ty), 0); cr_assert_eq(ty, 3); /* control */
	cr_assert_eq(gguf_arr_i64(types, 3, &ty), 0); cr_assert_eq(ty, 6); /* byte */
	uint64_t u;
	cr_assert_eq(gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &u), 0); cr_assert_eq(u, 1);
	bool b;
	cr_assert_eq(gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b), 0); cr_assert(b);
	gguf_close(g);
}
