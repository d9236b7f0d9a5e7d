/* gguf_write: streaming GGUF v3 writer (see gguf_write.h). */
#include "loader/gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc/err.h"
#include "loader/quant.h"

struct gw_buf {
	uint8_t *p;
	size_t len, cap;
};

struct gw_tensor {
	char name[GGUF_MAX_NAME + 1];
	uint32_t type;
	uint32_t n_dims;
	uint64_t ne[GGUF_MAX_DIMS];
	uint64_t nbytes;
	uint64_t offset;
};

enum gw_state { GW_META, GW_DATA, GW_DONE, GW_FAILED };

struct gguf_writer {
	char *path;       /* final name */
	char *tmp_path;   /* what we write; renamed to path at the end */
	FILE *f;
	enum gw_state state;
	struct gw_buf kv; /* serialized KV pairs, in insertion order */
	uint64_t n_kv;
	char **keys;      /* for duplicate detection */
	size_t keys_cap;
	struct gw_tensor *t;
	uint64_t n_t, t_cap;
	uint64_t data_start;  /* file offset of the tensor data section */
	uint64_t data_size;   /* padded size of the data section */
	uint64_t cur;         /* tensor being written */
	uint64_t cur_done;    /* bytes of it written so far */
};

static const uint8_t gw_zeros[GGUF_WRITE_ALIGNMENT];

static uint64_t gw_align(uint64_t x)
{
	return (x + GGUF_WRITE_ALIGNMENT - 1) / GGUF_WRITE_ALIGNMENT * GGUF_WRITE_ALIGNMENT;
}

static int gw_reserve(struct gw_buf *b, size_t extra)
{
	if (extra > SIZE_MAX - b->len)
		return err_set(ERR_RANGE, "gguf writer: metadata too large");
	size_t need = b->len + extra;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		return err_set(ERR_NOMEM, "gguf writer: out of memory for metadata (%zu bytes)", cap);
	b->p = p;
	b->cap = cap;
	return 0;
}

static int gw_put(struct gw_buf *b, const void *data, size_t n)
{
	int rc = gw_reserve(b, n);
	if (rc)
		return rc;
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
	return 0;
}

/* Files are little-endian; so is every machine this engine targets. */
static int gw_put_u32(struct gw_buf *b, uint32_t v) { return gw_put(b, &v, 4); }
static int gw_put_u64(struct gw_buf *b, uint64_t v) { return gw_put(b, &v, 8); }

static int gw_put_str(struct gw_buf *b, const char *s, uint64_t len)
{
	int rc = gw_put_u64(b, len);
	return rc ? rc : gw_put(b, s, (size_t)len);
}

int gguf_writer_create(const char *path, struct gguf_writer **out)
{
	*out = NULL;
	struct gguf_writer *w = calloc(1, sizeof *w);
	if (!w)
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	size_t n = strlen(path);
	w->path = strdup(path);
	w->tmp_path = malloc(n + 16);
	if (!w->path || !w->tmp_path) {
		gguf_writer_destroy(w);
		return err_set(ERR_NOMEM, "%s: out of memory", path);
	}
	/* Same directory as the target so the final rename is atomic. */
	snprintf(w->tmp_path, n + 16, "%s.tmp.XXXXXX", path);
	int fd = mkstemp(w->tmp_path);
	if (fd < 0) {
		int e = errno;
		w->tmp_path[0] = 0;
		gguf_writer_destroy(w);
		return err_set(ERR_IO, "%s: cannot create temporary file: %s", path, strerror(e));
	}
	mode_t um = umask(0);
	umask(um);
	(void)fchmod(fd, 0666 & ~um); /* mkstemp makes 0600; a model file is ordinary data */
	w->f = fdopen(fd, "wb");
	if (!w->f) {
		close(fd);
		gguf_writer_destroy(w);
		return err_set(ERR_IO, "%s: fdopen failed", path);
	}
	setvbuf(w->f, NULL, _IOFBF, 1 << 22);
	*out = w;
	return 0;
}

void gguf_writer_destroy(struct gguf_writer *w)
{
	if (!w)
		return;
	if (w->f)
		fclose(w->f);
	if (w->state != GW_DONE && w->tmp_path && w->tmp_path[0])
		unlink(w->tmp_path);
	for (uint64_t i = 0; i < w->n_kv; i++)
		free(w->keys[i]);
	free(w->keys);
	free(w->kv.p);
	free(w->t);
	free(w->path);
	free(w->tmp_path);
	free(w);
}

/* Validate the key, remember it and serialize key + value type. */
static int gw_key(struct gguf_writer *w, const char *key, uint32_t type)
{
	if (w->state != GW_META)
		return err_set(ERR_STATE, "%s: metadata %s: added after tensor data started", w->path, key ? key : "?");
	if (!key || !key[0])
		return err_set(ERR_INVAL, "%s: metadata key is empty", w->path);
	size_t len = strlen(key);
	if (len > 65535)
		return err_set(ERR_RANGE, "%s: metadata key longer than 65535 bytes", w->path);
	for (uint64_t i = 0; i < w->n_kv; i++)
		if (!strcmp(w->keys[i], key))
			return err_set(ERR_INVAL, "%s: metadata %s: duplicate key", w->path, key);
	if (w->n_kv >= GGUF_MAX_KV)
		return err_set(ERR_RANGE, "%s: metadata %s: more than %u keys", w->path, key, GGUF_MAX_KV);
	if (w->n_kv == w->keys_cap) {
		size_t cap = w->keys_cap ? w->keys_cap * 2 : 64;
		char **k = realloc(w->keys, cap * sizeof *k);
		if (!k)
			return err_set(ERR_NOMEM, "%s: out of memory", w->path);
		w->keys = k;
		w->keys_cap = cap;
	}
	char *dup = strdup(key);
	if (!dup)
		return err_set(ERR_NOMEM, "%s: out of memory", w->path);
	int rc = gw_put_str(&w->kv, key, len);
	if (!rc)
		rc = gw_put_u32(&w->kv, type);
	if (rc) {
		free(dup);
		return rc;
	}
	w->keys[w->n_kv++] = dup;
	return 0;
}

static int gw_scalar(struct gguf_writer *w, const char *key, uint32_t type, const void *v, size_t size)
{
	size_t mark = w->kv.len;
	int rc = gw_key(w, key, type);
	if (rc)
		return rc;
	rc = gw_put(&w->kv, v, size);
	if (rc) {
		/* Undo the half-serialized pair so the file stays consistent. */
		w->kv.len = mark;
		free(w->keys[--w->n_kv]);
	}
	return rc;
}

int gguf_writer_add_u8(struct gguf_writer *w, const char *key, uint8_t v) { return gw_scalar(w, key, GGUF_U8, &v, 1); }
int gguf_writer_add_i8(struct gguf_writer *w, const char *key, int8_t v) { return gw_scalar(w, key, GGUF_I8, &v, 1); }
int gguf_writer_add_u16(struct gguf_writer *w, const char *key, uint16_t v) { return gw_scalar(w, key, GGUF_U16, &v, 2); }
int gguf_writer_add_i16(struct gguf_writer *w, const char *key, int16_t v) { return gw_scalar(w, key, GGUF_I16, &v, 2); }
int gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v) { return gw_scalar(w, key, GGUF_U32, &v, 4); }
int gguf_writer_add_i32(struct gguf_writer *w, const char *key, int32_t v) { return gw_scalar(w, key, GGUF_I32, &v, 4); }
int gguf_writer_add_u64(struct gguf_writer *w, const char *key, uint64_t v) { return gw_scalar(w, key, GGUF_U64, &v, 8); }
int gguf_writer_add_i64(struct gguf_writer *w, const char *key, int64_t v) { return gw_scalar(w, key, GGUF_I64, &v, 8); }
int gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v) { return gw_scalar(w, key, GGUF_F32, &v, 4); }
int gguf_writer_add_f64(struct gguf_writer *w, const char *key, double v) { return gw_scalar(w, key, GGUF_F64, &v, 8); }

int gguf_writer_add_bool(struct gguf_writer *w, const char *key, bool v)
{
	uint8_t b = v ? 1 : 0;
	return gw_scalar(w, key, GGUF_BOOL, &b, 1);
}

int gguf_writer_add_strn(struct gguf_writer *w, const char *key, const char *v, uint64_t len)
{
	if (len > GGUF_MAX_STRING)
		return err_set(ERR_RANGE, "%s: metadata %s: string of %llu bytes exceeds %u", w->path,
			       key, (unsigned long long)len, GGUF_MAX_STRING);
	size_t mark = w->kv.len;
	int rc = gw_key(w, key, GGUF_STRING);
	if (rc)
		return rc;
	rc = gw_put_str(&w->kv, v, len);
	if (rc) {
		w->kv.len = mark;
		free(w->keys[--w->n_kv]);
	}
	return rc;
}

int gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *v)
{
	return gguf_writer_add_strn(w, key, v, strlen(v));
}

int gguf_writer_add_arr(struct gguf_writer *w, const char *key, uint32_t elem_type,
			const void *data, uint64_t n)
{
	size_t es = gguf_vtype_size(elem_type);
	if (!es)
		return err_set(ERR_INVAL, "%s: metadata %s: bad array element type %u", w->path, key, elem_type);
	if (n > GGUF_MAX_ARRAY)
		return err_set(ERR_RANGE, "%s: metadata %s: %llu elements exceed %u", w->path, key,
			       (unsigned long long)n, GGUF_MAX_ARRAY);
	size_t mark = w->kv.len;
	int rc = gw_key(w, key, GGUF_ARRAY);
	if (rc)
		return rc;
	if (!(rc = gw_put_u32(&w->kv, elem_type)) && !(rc = gw_put_u64(&w->kv, n)))
		rc = gw_put(&w->kv, data, (size_t)n * es);
	if (rc) {
		w->kv.len = mark;
		free(w->keys[--w->n_kv]);
	}
	return rc;
}

int gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const char *const *strs,
			    const uint64_t *lens, uint64_t n)
{
	if (n > GGUF_MAX_ARRAY)
		return err_set(ERR_RANGE, "%s: metadata %s: %llu strings exceed %u", w->path, key,
			       (unsigned long long)n, GGUF_MAX_ARRAY);
	size_t mark = w->kv.len;
	int rc = gw_key(w, key, GGUF_ARRAY);
	if (rc)
		return rc;
	if (!(rc = gw_put_u32(&w->kv, GGUF_STRING)))
		rc = gw_put_u64(&w->kv, n);
	for (uint64_t i = 0; !rc && i < n; i++) {
		uint64_t len = lens ? lens[i] : strlen(strs[i]);
		if (len > GGUF_MAX_STRING)
			rc = err_set(ERR_RANGE, "%s: metadata %s[%llu]: string too long", w->path, key,
				     (unsigned long long)i);
		else
			rc = gw_put_str(&w->kv, strs[i], len);
	}
	if (rc) {
		w->kv.len = mark;
		free(w->keys[--w->n_kv]);
	}
	return rc;
}

/* Serialize the payload of a parsed value (not key/type). Arrays are copied
 * from the reader's mapping: scalars as n*size bytes, strings and nested arrays
 * through the per-element offsets the reader built. */
static int gw_put_value(struct gguf_writer *w, const char *key, const struct gguf_value *v)
{
	switch (v->type) {
	case GGUF_U8: case GGUF_I8: case GGUF_BOOL: { uint8_t x = (uint8_t)v->u; return gw_put(&w->kv, &x, 1); }
	case GGUF_U16: case GGUF_I16: { uint16_t x = (uint16_t)v->u; return gw_put(&w->kv, &x, 2); }
	case GGUF_U32: case GGUF_I32: { uint32_t x = (uint32_t)v->u; return gw_put(&w->kv, &x, 4); }
	case GGUF_U64: case GGUF_I64: return gw_put(&w->kv, &v->u, 8);
	case GGUF_F32: { float x = (float)v->f; return gw_put(&w->kv, &x, 4); }
	case GGUF_F64: return gw_put(&w->kv, &v->f, 8);
	case GGUF_STRING: return gw_put_str(&w->kv, v->s.ptr, v->s.len);
	case GGUF_ARRAY: {
		const struct gguf_array *a = &v->arr;
		uint64_t bytes;
		if (a->type == GGUF_STRING || a->type == GGUF_ARRAY) {
			if (!a->offsets && a->n)
				return err_set(ERR_INVAL, "%s: metadata %s: array without element offsets", w->path, key);
			bytes = a->n ? a->offsets[a->n] : 0;
		} else {
			size_t es = gguf_vtype_size(a->type);
			if (!es)
				return err_set(ERR_INVAL, "%s: metadata %s: bad array element type %u", w->path, key, a->type);
			if (a->n > UINT64_MAX / es)
				return err_set(ERR_RANGE, "%s: metadata %s: array too large", w->path, key);
			bytes = a->n * es;
		}
		if (bytes > SIZE_MAX)
			return err_set(ERR_RANGE, "%s: metadata %s: array too large", w->path, key);
		int rc = gw_put_u32(&w->kv, a->type);
		if (!rc)
			rc = gw_put_u64(&w->kv, a->n);
		if (!rc)
			rc = gw_put(&w->kv, a->data, (size_t)bytes);
		return rc;
	}
	default:
		return err_set(ERR_INVAL, "%s: metadata %s: unknown value type %u", w->path, key, v->type);
	}
}

int gguf_writer_add_value(struct gguf_writer *w, const char *key, const struct gguf_value *v)
{
	size_t mark = w->kv.len;
	int rc = gw_key(w, key, v->type);
	if (rc)
		return rc;
	rc = gw_put_value(w, key, v);
	if (rc) {
		w->kv.len = mark;
		free(w->keys[--w->n_kv]);
	}
	return rc;
}

int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type,
			   uint32_t n_dims, const uint64_t *ne)
{
	if (w->state != GW_META)
		return err_set(ERR_STATE, "%s: tensor %s: added after tensor data started", w->path, name);
	size_t len = strlen(name);
	if (!len || len > GGUF_MAX_NAME)
		return err_set(ERR_INVAL, "%s: tensor '%s': name must be 1..%d bytes", w->path, name, GGUF_MAX_NAME);
	if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
		return err_set(ERR_INVAL, "%s: tensor %s: n_dims %u not in 1..%d", w->path, name, n_dims, GGUF_MAX_DIMS);
	if (w->n_t >= GGUF_MAX_TENSORS)
		return err_set(ERR_RANGE, "%s: tensor %s: more than %u tensors", w->path, name, GGUF_MAX_TENSORS);
	for (uint64_t i = 0; i < w->n_t; i++)
		if (!strcmp(w->t[i].name, name))
			return err_set(ERR_INVAL, "%s: tensor %s: duplicate name", w->path, name);
	struct gw_tensor t = { .type = type, .n_dims = n_dims, .ne = { 1, 1, 1, 1 } };
	memcpy(t.name, name, len + 1);
	uint64_t rows = 1;
	for (uint32_t d = 0; d < n_dims; d++) {
		if (ne[d] == 0)
			return err_set(ERR_INVAL, "%s: tensor %s: ne[%u] is 0", w->path, name, d);
		t.ne[d] = ne[d];
		if (d > 0) {
			if (rows > UINT64_MAX / ne[d])
				return err_set(ERR_RANGE, "%s: tensor %s: element count overflows", w->path, name);
			rows *= ne[d];
		}
	}
	uint64_t row_bytes;
	int rc = quant_row_bytes(type, t.ne[0], &row_bytes);
	if (rc)
		return err_prefix(rc, "%s: tensor %s", w->path, name);
	if (row_bytes && rows > UINT64_MAX / row_bytes)
		return err_set(ERR_RANGE, "%s: tensor %s: byte size overflows", w->path, name);
	t.nbytes = row_bytes * rows;
	uint64_t off = w->n_t ? gw_align(w->t[w->n_t - 1].offset + w->t[w->n_t - 1].nbytes) : 0;
	if (off > UINT64_MAX - t.nbytes - GGUF_WRITE_ALIGNMENT)
		return err_set(ERR_RANGE, "%s: tensor %s: data offset overflows", w->path, name);
	t.offset = off;
	if (w->n_t == w->t_cap) {
		uint64_t cap = w->t_cap ? w->t_cap * 2 : 256;
		struct gw_tensor *p = realloc(w->t, cap * sizeof *p);
		if (!p)
			return err_set(ERR_NOMEM, "%s: out of memory", w->path);
		w->t = p;
		w->t_cap = cap;
	}
	w->t[w->n_t++] = t;
	return 0;
}

static int gw_fwrite(struct gguf_writer *w, const void *p, size_t n)
{
	if (n && fwrite(p, 1, n, w->f) != n) {
		w->state = GW_FAILED;
		return err_set(ERR_IO, "%s: write failed: %s", w->tmp_path, strerror(errno));
	}
	return 0;
}

int gguf_writer_begin_data(struct gguf_writer *w)
{
	if (w->state != GW_META)
		return err_set(ERR_STATE, "%s: begin_data called twice", w->path);
	struct gw_buf h = { 0 };
	int rc = gw_put(&h, "GGUF", 4);
	if (!rc) rc = gw_put_u32(&h, 3);
	if (!rc) rc = gw_put_u64(&h, w->n_t);
	if (!rc) rc = gw_put_u64(&h, w->n_kv);
	if (!rc) rc = gw_put(&h, w->kv.p, w->kv.len);
	for (uint64_t i = 0; !rc && i < w->n_t; i++) {
		const struct gw_tensor *t = &w->t[i];
		rc = gw_put_str(&h, t->name, strlen(t->name));
		if (!rc) rc = gw_put_u32(&h, t->n_dims);
		for (uint32_t d = 0; !rc && d < t->n_dims; d++)
			rc = gw_put_u64(&h, t->ne[d]);
		if (!rc) rc = gw_put_u32(&h, t->type);
		if (!rc) rc = gw_put_u64(&h, t->offset);
	}
	if (!rc) {
		w->data_start = gw_align(h.len);
		rc = gw_put(&h, gw_zeros, (size_t)(w->data_start - h.len));
	}
	if (!rc)
		rc = gw_fwrite(w, h.p, h.len);
	free(h.p);
	if (rc)
		return rc;
	/* The metadata is on its way to disk; the copy is no longer needed. */
	free(w->kv.p);
	w->kv = (struct gw_buf){ 0 };
	w->data_size = w->n_t ? gw_align(w->t[w->n_t - 1].offset + w->t[w->n_t - 1].nbytes) : 0;
	w->state = GW_DATA;
	w->cur = 0;
	w->cur_done = 0;
	return 0;
}

int gguf_writer_write(struct gguf_writer *w, const void *data, size_t n)
{
	if (w->state != GW_DATA)
		return err_set(ERR_STATE, "%s: tensor data written outside the data phase", w->path);
	while (n) {
		if (w->cur >= w->n_t) {
			w->state = GW_FAILED;
			return err_set(ERR_RANGE, "%s: %zu bytes written past the last tensor", w->path, n);
		}
		const struct gw_tensor *t = &w->t[w->cur];
		uint64_t left = t->nbytes - w->cur_done;
		if (n > left) {
			w->state = GW_FAILED;
			return err_set(ERR_RANGE, "%s: tensor %s: %zu bytes written but only %llu remain",
				       w->path, t->name, n, (unsigned long long)left);
		}
		int rc = gw_fwrite(w, data, n);
		if (rc)
			return rc;
		w->cur_done += n;
		n = 0;
		if (w->cur_done == t->nbytes) {
			uint64_t end = t->offset + t->nbytes;
			rc = gw_fwrite(w, gw_zeros, (size_t)(gw_align(end) - end));
			if (rc)
				return rc;
			w->cur++;
			w->cur_done = 0;
		}
	}
	return 0;
}

int gguf_writer_current(const struct gguf_writer *w, uint64_t *index, uint64_t *remaining)
{
	if (w->state != GW_DATA || w->cur >= w->n_t)
		return err_set(ERR_STATE, "%s: no tensor is being written", w->path);
	*index = w->cur;
	*remaining = w->t[w->cur].nbytes - w->cur_done;
	return 0;
}

int gguf_writer_finish(struct gguf_writer *w)
{
	if (w->state == GW_META) {
		int rc = gguf_writer_begin_data(w);
		if (rc)
			return rc;
	}
	if (w->state != GW_DATA)
		return err_set(ERR_STATE, "%s: writer is not in a state to finish (earlier error)", w->path);
	if (w->cur != w->n_t)
		return err_set(ERR_STATE, "%s: tensor %s: data incomplete (%llu of %llu bytes)", w->path,
			       w->t[w->cur].name, (unsigned long long)w->cur_done,
			       (unsigned long long)w->t[w->cur].nbytes);
	FILE *f = w->f;
	w->f = NULL;
	int bad = fflush(f) != 0;
	int e = errno;
	if (fclose(f) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad) {
		w->state = GW_FAILED;
		return err_set(ERR_IO, "%s: write failed: %s", w->tmp_path, strerror(e));
	}
	if (rename(w->tmp_path, w->path) != 0) {
		e = errno;
		w->state = GW_FAILED;
		return err_set(ERR_IO, "%s: rename from %s failed: %s", w->path, w->tmp_path, strerror(e));
	}
	w->state = GW_DONE;
	return 0;
}

uint64_t gguf_writer_n_tensors(const struct gguf_writer *w)
{
	return w->n_t;
}

uint64_t gguf_writer_file_size(const struct gguf_writer *w)
{
	return w->data_start + w->data_size;
}

uint64_t gguf_writer_data_offset(const struct gguf_writer *w)
{
	return w->data_start;
}
