/* gguf_write: streaming GGUF v3 writer (see gguf_write.h). */
#include "formats/gguf_write.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "formats/quant.h"
#include "formats/tensor_out.h"

_Static_assert(GGUF_MAX_NAME < TENSOR_OUT_MAX_NAME && GGUF_MAX_DIMS <= TENSOR_OUT_MAX_DIMS,
	       "tensor_out must hold any GGUF tensor info");

struct gw_buf {
	uint8_t *p;
	size_t len, cap;
};

struct gguf_writer {
	struct tensor_out out; /* file, tensor infos (dims = ne[]), data phase */
	struct gw_buf kv;      /* serialized KV pairs, in insertion order */
	uint64_t n_kv;
	char **keys;           /* for duplicate detection */
	size_t keys_cap;
	uint64_t data_start;   /* file offset of the tensor data section */
	uint64_t data_size;    /* padded size of the data section */
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
	/* The limit leaves room for the last tensor's padding. */
	int rc = tensor_out_open(&w->out, path, GGUF_WRITE_ALIGNMENT, UINT64_MAX - GGUF_WRITE_ALIGNMENT);
	if (rc) {
		gguf_writer_destroy(w);
		return rc;
	}
	*out = w;
	return 0;
}

void gguf_writer_destroy(struct gguf_writer *w)
{
	if (!w)
		return;
	tensor_out_cleanup(&w->out);
	for (uint64_t i = 0; i < w->n_kv; i++)
		free(w->keys[i]);
	free(w->keys);
	free(w->kv.p);
	free(w);
}

/* Validate the key, remember it and serialize key + value type. */
static int gw_key(struct gguf_writer *w, const char *key, uint32_t type)
{
	int rc = tensor_out_check_meta(&w->out, "metadata", key);
	if (rc)
		return rc;
	if (!key || !key[0])
		return err_set(ERR_INVAL, "%s: metadata key is empty", w->out.path);
	size_t len = strlen(key);
	if (len > 65535)
		return err_set(ERR_RANGE, "%s: metadata key longer than 65535 bytes", w->out.path);
	for (uint64_t i = 0; i < w->n_kv; i++)
		if (!strcmp(w->keys[i], key))
			return err_set(ERR_INVAL, "%s: metadata %s: duplicate key", w->out.path, key);
	if (w->n_kv >= GGUF_MAX_KV)
		return err_set(ERR_RANGE, "%s: metadata %s: more than %u keys", w->out.path, key, GGUF_MAX_KV);
	if (w->n_kv == w->keys_cap) {
		size_t cap = w->keys_cap ? w->keys_cap * 2 : 64;
		char **k = realloc(w->keys, cap * sizeof *k);
		if (!k)
			return err_set(ERR_NOMEM, "%s: out of memory", w->out.path);
		w->keys = k;
		w->keys_cap = cap;
	}
	char *dup = strdup(key);
	if (!dup)
		return err_set(ERR_NOMEM, "%s: out of memory", w->out.path);
	rc = gw_put_str(&w->kv, key, len);
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
		return err_set(ERR_RANGE, "%s: metadata %s: string of %llu bytes exceeds %u", w->out.path,
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
		return err_set(ERR_INVAL, "%s: metadata %s: bad array element type %u", w->out.path, key, elem_type);
	if (n > GGUF_MAX_ARRAY)
		return err_set(ERR_RANGE, "%s: metadata %s: %llu elements exceed %u", w->out.path, key,
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
		return err_set(ERR_RANGE, "%s: metadata %s: %llu strings exceed %u", w->out.path, key,
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
			rc = err_set(ERR_RANGE, "%s: metadata %s[%llu]: string too long", w->out.path, key,
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
				return err_set(ERR_INVAL, "%s: metadata %s: array without element offsets", w->out.path, key);
			bytes = a->n ? a->offsets[a->n] : 0;
		} else {
			size_t es = gguf_vtype_size(a->type);
			if (!es)
				return err_set(ERR_INVAL, "%s: metadata %s: bad array element type %u", w->out.path, key, a->type);
			if (a->n > UINT64_MAX / es)
				return err_set(ERR_RANGE, "%s: metadata %s: array too large", w->out.path, key);
			bytes = a->n * es;
		}
		if (bytes > SIZE_MAX)
			return err_set(ERR_RANGE, "%s: metadata %s: array too large", w->out.path, key);
		int rc = gw_put_u32(&w->kv, a->type);
		if (!rc)
			rc = gw_put_u64(&w->kv, a->n);
		if (!rc)
			rc = gw_put(&w->kv, a->data, (size_t)bytes);
		return rc;
	}
	default:
		return err_set(ERR_INVAL, "%s: metadata %s: unknown value type %u", w->out.path, key, v->type);
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
	int rc = tensor_out_check_meta(&w->out, "tensor", name);
	if (rc)
		return rc;
	size_t len = strlen(name);
	if (!len || len > GGUF_MAX_NAME)
		return err_set(ERR_INVAL, "%s: tensor '%s': name must be 1..%d bytes", w->out.path, name, GGUF_MAX_NAME);
	if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
		return err_set(ERR_INVAL, "%s: tensor %s: n_dims %u not in 1..%d", w->out.path, name, n_dims, GGUF_MAX_DIMS);
	if (w->out.n_t >= GGUF_MAX_TENSORS)
		return err_set(ERR_RANGE, "%s: tensor %s: more than %u tensors", w->out.path, name, GGUF_MAX_TENSORS);
	uint64_t rows = 1;
	for (uint32_t d = 0; d < n_dims; d++) {
		if (ne[d] == 0)
			return err_set(ERR_INVAL, "%s: tensor %s: ne[%u] is 0", w->out.path, name, d);
		if (d > 0) {
			if (rows > UINT64_MAX / ne[d])
				return err_set(ERR_RANGE, "%s: tensor %s: element count overflows", w->out.path, name);
			rows *= ne[d];
		}
	}
	uint64_t row_bytes;
	rc = quant_row_bytes(type, ne[0], &row_bytes);
	if (rc)
		return err_prefix(rc, "%s: tensor %s", w->out.path, name);
	if (row_bytes && rows > UINT64_MAX / row_bytes)
		return err_set(ERR_RANGE, "%s: tensor %s: byte size overflows", w->out.path, name);
	return tensor_out_add(&w->out, name, type, n_dims, ne, row_bytes * rows);
}

int gguf_writer_begin_data(struct gguf_writer *w)
{
	const struct tensor_out *o = &w->out;
	struct gw_buf h = { 0 };
	int rc = gw_put(&h, "GGUF", 4);
	if (!rc) rc = gw_put_u32(&h, 3);
	if (!rc) rc = gw_put_u64(&h, o->n_t);
	if (!rc) rc = gw_put_u64(&h, w->n_kv);
	if (!rc) rc = gw_put(&h, w->kv.p, w->kv.len);
	for (uint64_t i = 0; !rc && i < o->n_t; i++) {
		const struct tensor_out_tensor *t = &o->t[i];
		rc = gw_put_str(&h, t->name, strlen(t->name));
		if (!rc) rc = gw_put_u32(&h, t->n_dims);
		for (uint32_t d = 0; !rc && d < t->n_dims; d++)
			rc = gw_put_u64(&h, t->dims[d]);
		if (!rc) rc = gw_put_u32(&h, t->type);
		if (!rc) rc = gw_put_u64(&h, t->offset);
	}
	uint64_t data_start = gw_align(h.len);
	if (!rc)
		rc = gw_put(&h, gw_zeros, (size_t)(data_start - h.len));
	/* tensor_out refuses a second call; nothing here has changed before it. */
	if (!rc)
		rc = tensor_out_begin_data(&w->out, h.p, h.len);
	free(h.p);
	if (rc)
		return rc;
	/* The metadata is on its way to disk; the copy is no longer needed. */
	free(w->kv.p);
	w->kv = (struct gw_buf){ 0 };
	w->data_start = data_start;
	w->data_size = tensor_out_data_size(o);
	return 0;
}

int gguf_writer_write(struct gguf_writer *w, const void *data, size_t n)
{
	return tensor_out_write(&w->out, data, n);
}

int gguf_writer_current(const struct gguf_writer *w, uint64_t *index, uint64_t *remaining)
{
	return tensor_out_current(&w->out, index, remaining);
}

int gguf_writer_finish(struct gguf_writer *w)
{
	if (w->out.state == TENSOR_OUT_META) {
		int rc = gguf_writer_begin_data(w);
		if (rc)
			return rc;
	}
	return tensor_out_finish(&w->out);
}

uint64_t gguf_writer_n_tensors(const struct gguf_writer *w)
{
	return w->out.n_t;
}

uint64_t gguf_writer_file_size(const struct gguf_writer *w)
{
	return w->data_start + w->data_size;
}

uint64_t gguf_writer_data_offset(const struct gguf_writer *w)
{
	return w->data_start;
}
