/* safetensors parser: one negative test per validation rule (code and message
 * checked), positive parses of hand-built images, sharded checkpoints in a
 * temporary directory, and the golden checkpoint. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "formats/safetensors.h"
#include "tests/golden.h"

/* A file image: u64 LE header length, the header, data_size bytes 0,1,2,... */
static uint8_t *st_image(const char *json, size_t data_size, size_t *size)
{
	size_t hl = strlen(json);
	*size = 8 + hl + data_size;
	uint8_t *b = malloc(*size);
	cr_assert(b);
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
	memcpy(b + 8, json, hl);
	for (size_t i = 0; i < data_size; i++)
		b[8 + hl + i] = (uint8_t)i;
	return b;
}

/* Parse an image that must fail with code and a message containing needle. */
static void expect_fail(const char *json, size_t data_size, int code, const char *needle)
{
	size_t size;
	uint8_t *b = st_image(json, data_size, &size);
	struct safetensors_file *f = (void *)1;
	int rc = safetensors_parse(b, size, "t.safetensors", &f);
	cr_expect_eq(rc, code, "rc %d (%s), want %d for %s", rc, err_msg(), code, json);
	cr_expect_null(f);
	cr_expect(strstr(err_msg(), needle), "message '%s' lacks '%s'", err_msg(), needle);
	cr_expect(strstr(err_msg(), "t.safetensors"), "message '%s' does not name the file", err_msg());
	free(b);
}

Test(safetensors, parses_tensors_metadata_and_data)
{
	const char *json =
		"{\"__metadata__\":{\"format\":\"pt\"},"
		"\"b\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[8,20]},"
		"\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		"\"e\":{\"dtype\":\"BF16\",\"shape\":[0,4],\"data_offsets\":[20,20]},"
		"\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[24,32]}}    ";
	size_t size;
	uint8_t *b = st_image(json, 32, &size);
	struct safetensors_file *f;
	cr_assert_eq(safetensors_parse(b, size, "t.safetensors", &f), 0, "%s", err_msg());
	cr_assert_eq(f->n_tensors, 4);
	cr_assert_eq(f->n_meta, 1);
	cr_assert_str_eq(safetensors_meta(f, "format"), "pt");
	cr_assert_null(safetensors_meta(f, "nope"));
	cr_assert_eq(f->data_offset, 8 + strlen(json));

	const struct safetensors_tensor *t = safetensors_find(f, "b");
	cr_assert(t);
	cr_assert_eq(t->dtype, ST_F16);
	cr_assert_eq(t->n_dims, 2);
	cr_assert_eq(t->shape[0], 2);
	cr_assert_eq(t->shape[1], 3);
	cr_assert_eq(t->begin, 8);
	cr_assert_eq(t->end, 20);
	cr_assert_eq(t->data, b + f->data_offset + 8);
	cr_assert_eq(t->data[0], 8); /* the image's data bytes count up */

	t = safetensors_find(f, "s");
	cr_assert(t);
	cr_assert_eq(t->n_dims, 0);
	cr_assert_eq(t->end - t->begin, 8);
	t = safetensors_find(f, "e");
	cr_assert(t);
	cr_assert_eq(t->shape[0], 0);
	cr_assert_null(safetensors_find(f, "zz"));
	safetensors_close(f);
	free(b);
}

Test(safetensors, dtype_table)
{
	uint32_t d, type;
	cr_assert_eq(safetensors_dtype_parse("BF16", &d), 0);
	cr_assert_eq(d, ST_BF16);
	cr_assert_eq(safetensors_dtype_size(ST_BF16), 2);
	cr_assert_eq(safetensors_dtype_parse("F8_E4M3", &d), 0);
	cr_assert_eq(safetensors_dtype_size(d), 1);
	cr_assert_eq(safetensors_dtype_parse("U64", &d), 0);
	cr_assert_eq(safetensors_dtype_size(d), 8);
	cr_assert_eq(safetensors_dtype_parse("f32", &d), ERR_UNSUP); /* names are upper case */
	cr_assert_eq(safetensors_dtype_to_tensor_type(ST_F32, &type), 0);
	cr_assert_eq(type, 0);
	cr_assert_eq(safetensors_dtype_to_tensor_type(ST_BF16, &type), 0);
	cr_assert_eq(type, 30);
	cr_assert_eq(safetensors_dtype_to_tensor_type(ST_I8, &type), ERR_UNSUP);
	cr_assert_str_eq(safetensors_dtype_str(ST_F8_E5M2), "F8_E5M2");
}

Test(safetensors, header_length_zero)
{
	uint8_t b[16] = { 0 };
	struct safetensors_file *f;
	cr_assert_eq(safetensors_parse(b, sizeof b, "t.safetensors", &f), ERR_INVAL);
	cr_assert(strstr(err_msg(), "header length"), "%s", err_msg());
}

Test(safetensors, header_length_over_cap)
{
	uint8_t b[16] = { 0 };
	uint64_t n = (uint64_t)SAFETENSORS_MAX_HEADER + 1;
	memcpy(b, &n, 8);
	struct safetensors_file *f;
	cr_assert_eq(safetensors_parse(b, sizeof b, "t.safetensors", &f), ERR_RANGE);
	cr_assert(strstr(err_msg(), "exceeds"), "%s", err_msg());
	/* 2^64-1 must not wrap into something small. */
	memset(b, 0xff, 8);
	cr_assert_eq(safetensors_parse(b, sizeof b, "t.safetensors", &f), ERR_RANGE);
}

Test(safetensors, file_shorter_than_length_field)
{
	uint8_t b[5] = { 1, 0, 0, 0, 0 };
	struct safetensors_file *f;
	cr_assert_eq(safetensors_parse(b, sizeof b, "t.safetensors", &f), ERR_INVAL);
	cr_assert(strstr(err_msg(), "header length"), "%s", err_msg());
}

Test(safetensors, header_larger_than_file)
{
	size_t size;
	uint8_t *b = st_image("{}", 0, &size);
	b[0] = 3; /* claims 3 bytes, file holds 2 */
	struct safetensors_file *f;
	cr_assert_eq(safetensors_parse(b, size, "t.safetensors", &f), ERR_RANGE);
	cr_assert(strstr(err_msg(), "larger than the file"), "%s", err_msg());
	free(b);
}

Test(safetensors, malformed_json)
{
	expect_fail("{\"a\":{\"dtype\":\"F32\",", 0, ERR_INVAL, "malformed JSON");
	expect_fail("{\"a\":1} trailing", 0, ERR_INVAL, "malformed JSON");
}

Test(safetensors, not_an_object)
{
	expect_fail("[1,2,3]", 0, ERR_INVAL, "not a JSON object");
	expect_fail("{\"a\":[1]}", 0, ERR_INVAL, "not an object");
}

Test(safetensors, duplicate_keys)
{
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
		    8, ERR_INVAL, "duplicate");
}

Test(safetensors, unknown_dtype)
{
	expect_fail("{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 16, ERR_INVAL,
		    "unknown dtype");
	expect_fail("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ERR_INVAL, "dtype");
}

Test(safetensors, missing_fields)
{
	expect_fail("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ERR_INVAL, "dtype: missing");
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, ERR_INVAL, "shape: missing");
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, ERR_INVAL, "data_offsets: missing");
}

Test(safetensors, bad_shape_values)
{
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, ERR_INVAL,
		    "negative");
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, ERR_INVAL,
		    "not an integer");
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
		    ERR_UNSUP, "dimensions");
	/* 2^62 * 2^62 elements overflow u64. */
	expect_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[4611686018427387904,4611686018427387904],"
		    "\"data_offsets\":[0,4]}}", 4, ERR_RANGE, "overflows");
	/* 2^62 elements of 8 bytes overflow the byte count. */
	expect_fail("{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],"
		    "\"data_offsets\":[0,4]}}", 4, ERR_RANGE, "overflows");
}

Test(safetensors, size_mismatch)
{
	/* 2x3 F32 is 24 bytes, offsets give 20 */
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24, ERR_INVAL,
		    "need 24");
	/* same bytes, wrong dtype size */
	expect_fail("{\"a\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, ERR_INVAL,
		    "need 12");
}

Test(safetensors, offsets_outside_data)
{
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 8, ERR_RANGE,
		    "outside the data section");
	expect_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],"
		    "\"data_offsets\":[18446744073709551615,18446744073709551615]}}", 8, ERR_INVAL,
		    "malformed JSON"); /* beyond int64: jansson rejects the number */
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 8, ERR_INVAL,
		    "data_offsets");
}

Test(safetensors, overlapping)
{
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
		    12, ERR_INVAL, "overlaps");
	/* identical ranges overlap too */
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		    "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		    4, ERR_INVAL, "overlaps");
}

Test(safetensors, begin_after_end)
{
	expect_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8, ERR_INVAL,
		    "begin 8 > end 4");
}

Test(safetensors, metadata_values_must_be_strings)
{
	expect_fail("{\"__metadata__\":{\"n\":1}}", 0, ERR_INVAL, "__metadata__");
	expect_fail("{\"__metadata__\":[]}", 0, ERR_INVAL, "__metadata__");
}

Test(safetensors, header_only_entry)
{
	const char *json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
	struct safetensors_file *f;
	cr_assert_eq(safetensors_parse_header(json, strlen(json), 8, "h", &f), 0, "%s", err_msg());
	cr_assert_eq(f->n_tensors, 1);
	cr_assert_null(f->tensors[0].data);
	safetensors_close(f);
	cr_assert_eq(safetensors_parse_header(json, strlen(json), 7, "h", &f), ERR_RANGE);
}

/* ---- files and shards ---- */

static char tmpdir[64];

static void mk_tmpdir(void)
{
	strcpy(tmpdir, "/tmp/unicorn-st-XXXXXX");
	cr_assert(mkdtemp(tmpdir));
}

static void rm_tmpdir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	cr_expect_eq(system(cmd), 0);
}

static void write_file(const char *name, const void *data, size_t n)
{
	char path[256];
	snprintf(path, sizeof path, "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "wb");
	cr_assert(f, "%s", path);
	cr_assert_eq(fwrite(data, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

static void write_st(const char *name, const char *json, size_t data_size)
{
	size_t size;
	uint8_t *b = st_image(json, data_size, &size);
	write_file(name, b, size);
	free(b);
}

static int open_index(const char *index_json, struct safetensors_set **s)
{
	write_file("model.safetensors.index.json", index_json, strlen(index_json));
	char path[256];
	snprintf(path, sizeof path, "%s/model.safetensors.index.json", tmpdir);
	return safetensors_set_open(path, s);
}

static void write_two_shards(void)
{
	write_st("s1.safetensors",
		 "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		 "\"y\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[8,16]}}", 16);
	write_st("s2.safetensors", "{\"z\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]}}", 6);
}

Test(safetensors, sharded_index, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	write_two_shards();
	struct safetensors_set *s;
	int rc = open_index("{\"metadata\":{\"total_size\":22},\"weight_map\":{"
			    "\"x\":\"s1.safetensors\",\"z\":\"s2.safetensors\",\"y\":\"s1.safetensors\"}}", &s);
	cr_assert_eq(rc, 0, "%s", err_msg());
	cr_assert_eq(s->n_files, 2, "each shard opened once");
	cr_assert_eq(s->n_tensors, 3);
	int seen = 0;
	for (size_t i = 0; i < s->n_tensors; i++) {
		const struct safetensors_tensor *t = s->tensors[i];
		const struct safetensors_file *f = s->files[s->tensor_file[i]];
		cr_assert_eq(safetensors_find(f, t->name), t);
		if (!strcmp(t->name, "z")) {
			cr_assert(strstr(f->path, "s2.safetensors"));
			cr_assert_eq(t->dtype, ST_F16);
			seen++;
		}
	}
	cr_assert_eq(seen, 1);
	safetensors_set_close(s);
}

Test(safetensors, sharded_missing_shard, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	write_two_shards();
	struct safetensors_set *s;
	int rc = open_index("{\"weight_map\":{\"x\":\"s1.safetensors\",\"q\":\"s9.safetensors\"}}", &s);
	cr_assert_eq(rc, ERR_NOTFOUND, "%s", err_msg());
	cr_assert(strstr(err_msg(), "s9.safetensors"), "%s", err_msg());
	cr_assert(strstr(err_msg(), "model.safetensors.index.json"), "%s", err_msg());
}

Test(safetensors, sharded_path_traversal, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	write_two_shards();
	struct safetensors_set *s;
	const char *bad[] = { "../s1.safetensors", "sub/s1.safetensors", "/etc/passwd", "..", "" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char json[256];
		snprintf(json, sizeof json, "{\"weight_map\":{\"x\":\"%s\"}}", bad[i]);
		cr_assert_eq(open_index(json, &s), ERR_INVAL, "%s: %s", bad[i], err_msg());
		cr_assert(strstr(err_msg(), "plain file name"), "%s", err_msg());
	}
}

Test(safetensors, sharded_missing_tensor, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	write_two_shards();
	struct safetensors_set *s;
	int rc = open_index("{\"weight_map\":{\"x\":\"s1.safetensors\",\"z\":\"s1.safetensors\"}}", &s);
	cr_assert_eq(rc, ERR_NOTFOUND, "%s", err_msg());
	cr_assert(strstr(err_msg(), "tensor z not found in shard s1.safetensors"), "%s", err_msg());
}

Test(safetensors, sharded_bad_index, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	write_two_shards();
	struct safetensors_set *s;
	cr_assert_eq(open_index("{\"metadata\":{}}", &s), ERR_NOTFOUND);
	cr_assert(strstr(err_msg(), "weight_map"), "%s", err_msg());
	cr_assert_eq(open_index("{\"weight_map\":{\"x\":1}}", &s), ERR_INVAL);
	cr_assert_eq(open_index("{\"weight_map\":{\"x\":\"s1.safetensors\",\"x\":\"s1.safetensors\"}}", &s),
		     ERR_INVAL);
	cr_assert(strstr(err_msg(), "duplicate"), "%s", err_msg());
}

Test(safetensors, open_missing_and_truncated_file, .init = mk_tmpdir, .fini = rm_tmpdir)
{
	struct safetensors_file *f;
	char path[256];
	snprintf(path, sizeof path, "%s/none.safetensors", tmpdir);
	cr_assert_eq(safetensors_open(path, &f), ERR_NOTFOUND);
	write_file("short.safetensors", "\x02\0\0", 3);
	snprintf(path, sizeof path, "%s/short.safetensors", tmpdir);
	cr_assert_eq(safetensors_open(path, &f), ERR_INVAL);
	cr_assert(strstr(err_msg(), "short.safetensors"), "%s", err_msg());
}

Test(safetensors, golden_checkpoint)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/golden/gemma3-tiny-hf/model.safetensors", golden_shared_dir());
	struct safetensors_set *s;
	cr_assert_eq(safetensors_set_open(path, &s), 0, "%s", err_msg());
	cr_assert_eq(s->n_files, 1);
	cr_assert_eq(s->n_tensors, 2 + 6 * 13);
	const struct safetensors_tensor *t = safetensors_find(s->files[0], "model.embed_tokens.weight");
	cr_assert(t);
	cr_assert_eq(t->dtype, ST_F32);
	cr_assert_eq(t->n_dims, 2);
	cr_assert_eq(t->shape[0], 32000);
	cr_assert_eq(t->shape[1], 128);
	cr_assert_eq(t->end - t->begin, 32000ull * 128 * 4);
	t = safetensors_find(s->files[0], "model.layers.0.self_attn.k_proj.weight");
	cr_assert(t);
	cr_assert_eq(t->shape[0], 64);
	cr_assert_eq(t->shape[1], 128);
	safetensors_set_close(s);
}
