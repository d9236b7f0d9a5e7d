/* safetensors: header parsing, validation and shard sets. The JSON header is
 * hostile input: every dimension, offset and byte count is checked for
 * overflow and bounds before a tensor may point into the mapping. */
#include "formats/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/readfile.h"
#include "formats/quant.h"

static const struct {
	const char *name;
	size_t size;
} dtypes[ST_DTYPE_COUNT] = {
	[ST_BOOL] = { "BOOL", 1 },     [ST_U8] = { "U8", 1 },     [ST_I8] = { "I8", 1 },
	[ST_F8_E5M2] = { "F8_E5M2", 1 }, [ST_F8_E4M3] = { "F8_E4M3", 1 },
	[ST_I16] = { "I16", 2 },       [ST_U16] = { "U16", 2 },   [ST_F16] = { "F16", 2 },
	[ST_BF16] = { "BF16", 2 },     [ST_I32] = { "I32", 4 },   [ST_U32] = { "U32", 4 },
	[ST_F32] = { "F32", 4 },       [ST_F64] = { "F64", 8 },   [ST_I64] = { "I64", 8 },
	[ST_U64] = { "U64", 8 },
};

size_t safetensors_dtype_size(uint32_t dtype)
{
	return dtype < ST_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *safetensors_dtype_str(uint32_t dtype)
{
	return dtype < ST_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

int safetensors_dtype_parse(const char *name, uint32_t *dtype)
{
	for (uint32_t i = 0; i < ST_DTYPE_COUNT; i++)
		if (!strcmp(name, dtypes[i].name)) {
			*dtype = i;
			return 0;
		}
	return ERR_UNSUP;
}

int safetensors_dtype_to_tensor_type(uint32_t dtype, uint32_t *type)
{
	switch (dtype) {
	case ST_F32: *type = TENSOR_F32; return 0;
	case ST_F16: *type = TENSOR_F16; return 0;
	case ST_BF16: *type = TENSOR_BF16; return 0;
	default: return ERR_UNSUP;
	}
}

void safetensors_close(struct safetensors_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_tensors; i++)
		free(f->tensors[i].name);
	free(f->tensors);
	for (size_t i = 0; i < f->n_meta; i++) {
		free(f->meta[i].key);
		free(f->meta[i].value);
	}
	free(f->meta);
	if (f->mapped && f->base)
		munmap((void *)f->base, f->size);
	free(f->path);
	free(f);
}

static int cmp_tensor_name(const void *a, const void *b)
{
	return strcmp(((const struct safetensors_tensor *)a)->name,
		      ((const struct safetensors_tensor *)b)->name);
}

/* Order by begin, then end, so an overlap shows between neighbours. */
static int cmp_tensor_range(const void *a, const void *b)
{
	const struct safetensors_tensor *x = *(const struct safetensors_tensor *const *)a;
	const struct safetensors_tensor *y = *(const struct safetensors_tensor *const *)b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

static int parse_meta(struct safetensors_file *f, json_t *obj)
{
	if (!json_is_object(obj))
		return err_set(ERR_INVAL, "%s: __metadata__: not an object", f->path);
	size_t n = json_object_size(obj);
	f->meta = calloc(n ? n : 1, sizeof *f->meta);
	if (!f->meta)
		return err_set(ERR_NOMEM, "%s: __metadata__: out of memory", f->path);
	const char *key;
	json_t *val;
	json_object_foreach(obj, key, val) {
		if (!json_is_string(val))
			return err_set(ERR_INVAL, "%s: __metadata__: %s: value is not a string",
				       f->path, key);
		struct safetensors_meta *m = &f->meta[f->n_meta];
		m->key = strdup(key);
		m->value = strdup(json_string_value(val));
		f->n_meta++;
		if (!m->key || !m->value)
			return err_set(ERR_NOMEM, "%s: __metadata__: out of memory", f->path);
	}
	return 0;
}

static int parse_u64(const struct safetensors_file *f, const char *tname, const char *field,
		     json_t *v, uint64_t *out)
{
	if (!json_is_integer(v))
		return err_set(ERR_INVAL, "%s: %s: %s: not an integer", f->path, tname, field);
	json_int_t x = json_integer_value(v);
	if (x < 0)
		return err_set(ERR_INVAL, "%s: %s: %s: negative value %lld", f->path, tname, field,
			       (long long)x);
	*out = (uint64_t)x;
	return 0;
}

static int parse_tensor(const struct safetensors_file *f, const char *name, json_t *obj,
			uint64_t data_size, struct safetensors_tensor *t)
{
	if (!json_is_object(obj))
		return err_set(ERR_INVAL, "%s: %s: tensor entry is not an object", f->path, name);

	json_t *dt = json_object_get(obj, "dtype");
	if (!dt)
		return err_set(ERR_INVAL, "%s: %s: dtype: missing", f->path, name);
	if (!json_is_string(dt))
		return err_set(ERR_INVAL, "%s: %s: dtype: not a string", f->path, name);
	if (safetensors_dtype_parse(json_string_value(dt), &t->dtype))
		return err_set(ERR_INVAL, "%s: %s: dtype: unknown dtype '%.32s'", f->path, name,
			       json_string_value(dt));

	json_t *shape = json_object_get(obj, "shape");
	if (!shape)
		return err_set(ERR_INVAL, "%s: %s: shape: missing", f->path, name);
	if (!json_is_array(shape))
		return err_set(ERR_INVAL, "%s: %s: shape: not an array", f->path, name);
	size_t nd = json_array_size(shape);
	if (nd > SAFETENSORS_PARSE_MAX_DIMS)
		return err_set(ERR_UNSUP, "%s: %s: shape: %zu dimensions (at most %d)", f->path,
			       name, nd, SAFETENSORS_PARSE_MAX_DIMS);
	t->n_dims = (uint32_t)nd;
	uint64_t nelem = 1;
	for (size_t i = 0; i < nd; i++) {
		int rc = parse_u64(f, name, "shape", json_array_get(shape, i), &t->shape[i]);
		if (rc)
			return rc;
		if (__builtin_mul_overflow(nelem, t->shape[i], &nelem))
			return err_set(ERR_RANGE, "%s: %s: shape: element count overflows", f->path,
				       name);
	}
	uint64_t nbytes;
	if (__builtin_mul_overflow(nelem, (uint64_t)safetensors_dtype_size(t->dtype), &nbytes))
		return err_set(ERR_RANGE, "%s: %s: shape: byte size overflows", f->path, name);

	json_t *offs = json_object_get(obj, "data_offsets");
	if (!offs)
		return err_set(ERR_INVAL, "%s: %s: data_offsets: missing", f->path, name);
	if (!json_is_array(offs) || json_array_size(offs) != 2)
		return err_set(ERR_INVAL, "%s: %s: data_offsets: not an array [begin, end]", f->path,
			       name);
	int rc = parse_u64(f, name, "data_offsets", json_array_get(offs, 0), &t->begin);
	if (!rc)
		rc = parse_u64(f, name, "data_offsets", json_array_get(offs, 1), &t->end);
	if (rc)
		return rc;
	if (t->begin > t->end)
		return err_set(ERR_INVAL, "%s: %s: data_offsets: begin %" PRIu64 " > end %" PRIu64,
			       f->path, name, t->begin, t->end);
	if (t->end > data_size)
		return err_set(ERR_RANGE,
			       "%s: %s: data_offsets: end %" PRIu64 " outside the data section (%" PRIu64
			       " bytes)", f->path, name, t->end, data_size);
	if (t->end - t->begin != nbytes)
		return err_set(ERR_INVAL,
			       "%s: %s: data_offsets: %" PRIu64 " bytes but shape and dtype %s need %" PRIu64,
			       f->path, name, t->end - t->begin, safetensors_dtype_str(t->dtype), nbytes);
	return 0;
}

/* Parse the header into a new file object (tensor data left NULL). */
static int parse_header(const char *json, size_t len, uint64_t data_size, const char *name,
			struct safetensors_file **out)
{
	*out = NULL;
	struct safetensors_file *f = calloc(1, sizeof *f);
	if (!f)
		return err_set(ERR_NOMEM, "%s: out of memory", name);
	f->path = strdup(name);
	if (!f->path) {
		free(f);
		return err_set(ERR_NOMEM, "%s: out of memory", name);
	}
	f->header_len = len;
	f->data_offset = 8 + (uint64_t)len;

	int rc = 0;
	struct safetensors_tensor **by_range = NULL;
	json_error_t jerr;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		rc = err_set(ERR_INVAL, "%s: header: malformed JSON at line %d column %d: %s", name,
			     jerr.line, jerr.column, jerr.text);
		goto out;
	}
	if (!json_is_object(root)) {
		rc = err_set(ERR_INVAL, "%s: header: not a JSON object", name);
		goto out;
	}

	size_t n = json_object_size(root);
	f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
	if (!f->tensors) {
		rc = err_set(ERR_NOMEM, "%s: header: out of memory", name);
		goto out;
	}
	const char *key;
	json_t *val;
	json_object_foreach(root, key, val) {
		if (!strcmp(key, "__metadata__")) {
			if ((rc = parse_meta(f, val)))
				goto out;
			continue;
		}
		size_t klen = strlen(key);
		if (klen > SAFETENSORS_MAX_NAME) {
			rc = err_set(ERR_RANGE, "%s: tensor name of %zu bytes (at most %d)", name,
				     klen, SAFETENSORS_MAX_NAME);
			goto out;
		}
		struct safetensors_tensor *t = &f->tensors[f->n_tensors];
		if ((rc = parse_tensor(f, key, val, data_size, t)))
			goto out;
		if (!(t->name = strdup(key))) {
			rc = err_set(ERR_NOMEM, "%s: header: out of memory", name);
			goto out;
		}
		f->n_tensors++;
	}

	/* No two non-empty tensors may share bytes. */
	if (f->n_tensors > 1) {
		by_range = malloc(f->n_tensors * sizeof *by_range);
		if (!by_range) {
			rc = err_set(ERR_NOMEM, "%s: header: out of memory", name);
			goto out;
		}
		size_t m = 0;
		for (size_t i = 0; i < f->n_tensors; i++)
			if (f->tensors[i].end > f->tensors[i].begin)
				by_range[m++] = &f->tensors[i];
		qsort(by_range, m, sizeof *by_range, cmp_tensor_range);
		for (size_t i = 1; i < m; i++)
			if (by_range[i]->begin < by_range[i - 1]->end) {
				rc = err_set(ERR_INVAL,
					     "%s: %s: data_offsets: [%" PRIu64 ", %" PRIu64
					     ") overlaps tensor %s [%" PRIu64 ", %" PRIu64 ")",
					     name, by_range[i]->name, by_range[i]->begin, by_range[i]->end,
					     by_range[i - 1]->name, by_range[i - 1]->begin,
					     by_range[i - 1]->end);
				goto out;
			}
	}
	qsort(f->tensors, f->n_tensors, sizeof *f->tensors, cmp_tensor_name);

out:
	free(by_range);
	json_decref(root);
	if (rc) {
		safetensors_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

int safetensors_parse_header(const char *json, size_t len, uint64_t data_size, const char *name,
			     struct safetensors_file **out)
{
	*out = NULL;
	if (len > SAFETENSORS_MAX_HEADER)
		return err_set(ERR_RANGE, "%s: header length %zu exceeds %u bytes", name, len,
			       SAFETENSORS_MAX_HEADER);
	return parse_header(json, len, data_size, name, out);
}

int safetensors_parse(const void *data, size_t size, const char *name,
		      struct safetensors_file **out)
{
	*out = NULL;
	const uint8_t *p = data;
	if (size < 8)
		return err_set(ERR_INVAL, "%s: header length: file is only %zu bytes", name, size);
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | p[i];
	if (n == 0)
		return err_set(ERR_INVAL, "%s: header length: zero", name);
	if (n > SAFETENSORS_MAX_HEADER)
		return err_set(ERR_RANGE, "%s: header length %" PRIu64 " exceeds %u bytes", name, n,
			       SAFETENSORS_MAX_HEADER);
	if (n > size - 8)
		return err_set(ERR_RANGE,
			       "%s: header length %" PRIu64 " is larger than the file (%zu bytes)", name,
			       n, size);
	struct safetensors_file *f;
	int rc = parse_header((const char *)p + 8, (size_t)n, size - 8 - n, name, &f);
	if (rc)
		return rc;
	f->base = p;
	f->size = size;
	for (size_t i = 0; i < f->n_tensors; i++)
		f->tensors[i].data = p + f->data_offset + f->tensors[i].begin;
	*out = f;
	return 0;
}

int safetensors_open(const char *path, struct safetensors_file **out)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "%s: open: %s", path,
			       strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return err_set(ERR_IO, "%s: stat: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return err_set(ERR_INVAL, "%s: not a regular file", path);
	}
	if (st.st_size < 8) {
		close(fd);
		return err_set(ERR_INVAL, "%s: header length: file is only %lld bytes", path,
			       (long long)st.st_size);
	}
	size_t size = (size_t)st.st_size;
	void *base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	int e = errno;
	close(fd);
	if (base == MAP_FAILED)
		return err_set(ERR_IO, "%s: mmap: %s", path, strerror(e));
	int rc = safetensors_parse(base, size, path, out);
	if (rc) {
		munmap(base, size);
		return rc;
	}
	(*out)->mapped = 1;
	return 0;
}

const struct safetensors_tensor *safetensors_find(const struct safetensors_file *f, const char *name)
{
	struct safetensors_tensor key = { .name = (char *)name };
	return bsearch(&key, f->tensors, f->n_tensors, sizeof key, cmp_tensor_name);
}

const char *safetensors_meta(const struct safetensors_file *f, const char *key)
{
	for (size_t i = 0; i < f->n_meta; i++)
		if (!strcmp(f->meta[i].key, key))
			return f->meta[i].value;
	return NULL;
}

/* ---- checkpoints (one file or shards) ---- */

void safetensors_set_close(struct safetensors_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_files; i++)
		safetensors_close(s->files[i]);
	free(s->files);
	free(s->tensors);
	free(s->tensor_file);
	free(s->path);
	free(s);
}

static struct safetensors_set *set_new(const char *path)
{
	struct safetensors_set *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	if (!(s->path = strdup(path))) {
		free(s);
		return NULL;
	}
	return s;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

/* A shard must be a plain file name next to the index: no directories and no
 * way to climb out of the checkpoint folder. */
static int shard_name_ok(const char *s)
{
	return s[0] && !strchr(s, '/') && !strchr(s, '\\') && !strstr(s, "..") && strlen(s) < 256;
}

int safetensors_set_open_index(const char *json, size_t len, const char *index_path,
			       const char *dir, struct safetensors_set **out)
{
	*out = NULL;
	struct safetensors_set *s = set_new(index_path);
	if (!s)
		return err_set(ERR_NOMEM, "%s: out of memory", index_path);
	char **shard_names = NULL;
	char *shard_path = NULL;
	int rc = 0;
	json_error_t jerr;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		rc = err_set(ERR_INVAL, "%s: malformed JSON at line %d column %d: %s", index_path,
			     jerr.line, jerr.column, jerr.text);
		goto out;
	}
	if (!json_is_object(root)) {
		rc = err_set(ERR_INVAL, "%s: not a JSON object", index_path);
		goto out;
	}
	json_t *wm = json_object_get(root, "weight_map");
	if (!wm) {
		rc = err_set(ERR_NOTFOUND, "%s: weight_map: missing", index_path);
		goto out;
	}
	if (!json_is_object(wm)) {
		rc = err_set(ERR_INVAL, "%s: weight_map: not an object", index_path);
		goto out;
	}
	size_t n = json_object_size(wm);
	s->tensors = calloc(n ? n : 1, sizeof *s->tensors);
	s->tensor_file = calloc(n ? n : 1, sizeof *s->tensor_file);
	s->files = calloc(SAFETENSORS_MAX_SHARDS, sizeof *s->files);
	shard_names = calloc(SAFETENSORS_MAX_SHARDS, sizeof *shard_names);
	shard_path = malloc(strlen(dir) + 260);
	if (!s->tensors || !s->tensor_file || !s->files || !shard_names || !shard_path) {
		rc = err_set(ERR_NOMEM, "%s: out of memory", index_path);
		goto out;
	}
	const char *tname;
	json_t *val;
	json_object_foreach(wm, tname, val) {
		if (!json_is_string(val)) {
			rc = err_set(ERR_INVAL, "%s: weight_map: %s: shard is not a string", index_path,
				     tname);
			goto out;
		}
		const char *shard = json_string_value(val);
		if (!shard_name_ok(shard)) {
			rc = err_set(ERR_INVAL,
				     "%s: weight_map: %s: shard '%.64s' is not a plain file name in the "
				     "checkpoint directory", index_path, tname, shard);
			goto out;
		}
		size_t fi = 0;
		while (fi < s->n_files && strcmp(shard_names[fi], shard))
			fi++;
		if (fi == s->n_files) {
			if (s->n_files == SAFETENSORS_MAX_SHARDS) {
				rc = err_set(ERR_RANGE, "%s: weight_map: more than %d shards", index_path,
					     SAFETENSORS_MAX_SHARDS);
				goto out;
			}
			sprintf(shard_path, "%s/%s", dir, shard);
			rc = safetensors_open(shard_path, &s->files[fi]);
			if (rc) {
				err_prefix(rc, "%s: weight_map: %s", index_path, tname);
				goto out;
			}
			shard_names[fi] = (char *)shard;
			s->n_files++;
		}
		const struct safetensors_tensor *t = safetensors_find(s->files[fi], tname);
		if (!t) {
			rc = err_set(ERR_NOTFOUND, "%s: weight_map: tensor %s not found in shard %s",
				     index_path, tname, shard);
			goto out;
		}
		s->tensors[s->n_tensors] = t;
		s->tensor_file[s->n_tensors] = fi;
		s->n_tensors++;
	}
out:
	free(shard_path);
	free(shard_names); /* names point into root */
	json_decref(root);
	if (rc) {
		safetensors_set_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

int safetensors_set_open(const char *path, struct safetensors_set **out)
{
	*out = NULL;
	if (ends_with(path, ".json")) {
		char *text = NULL;
		size_t len = 0;
		int rc = readfile(path, SAFETENSORS_MAX_HEADER, &text, &len);
		if (rc)
			return rc;
		char *dir = strdup(path);
		if (!dir) {
			free(text);
			return err_set(ERR_NOMEM, "%s: out of memory", path);
		}
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = 0;
		else
			strcpy(dir, ".");
		rc = safetensors_set_open_index(text, len, path, dir, out);
		free(dir);
		free(text);
		return rc;
	}

	struct safetensors_set *s = set_new(path);
	if (!s)
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	s->files = calloc(1, sizeof *s->files);
	if (!s->files) {
		safetensors_set_close(s);
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	}
	int rc = safetensors_open(path, &s->files[0]);
	if (rc) {
		safetensors_set_close(s);
		return rc;
	}
	s->n_files = 1;
	struct safetensors_file *f = s->files[0];
	s->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *s->tensors);
	s->tensor_file = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *s->tensor_file);
	if (!s->tensors || !s->tensor_file) {
		safetensors_set_close(s);
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	}
	for (size_t i = 0; i < f->n_tensors; i++)
		s->tensors[i] = &f->tensors[i];
	s->n_tensors = f->n_tensors;
	*out = s;
	return 0;
}
