/* gguf: GGUF v2/v3 parser (see gguf.h and ../shared/spec/reference.md §2).
 *
 * The input is hostile until proven otherwise: every length is checked against
 * the bytes that remain before it is used, every allocation is bounded by the
 * input size, and nothing points into the buffer before its bounds are known.
 * Values are decoded little-endian byte by byte so unaligned fields are fine. */
#include "formats/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "formats/quant.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_KEY 65535
/* Nested arrays are legal but no real file uses them; a cap keeps a hostile
 * file from recursing us off the stack (12 bytes per level). */
#define GGUF_MAX_NEST 8
/* Smallest encodings, used to reject absurd counts before allocating. */
#define MIN_KV_BYTES 13     /* key len u64 + type u32 + 1-byte value */
#define MIN_TENSOR_BYTES 32 /* name len u64 + n_dims u32 + 1 dim u64 + type u32 + offset u64 */
#define MIN_ARRAY_BYTES 12  /* element type u32 + count u64 */

/* The public struct plus sorted indexes (lookups in O(log n), duplicate checks). */
struct gguf_priv {
	struct gguf pub; /* first: gguf_close casts back */
	const struct gguf_kv **kv_by_key;
	const struct gguf_tensor **t_by_name;
};

struct rd {
	const uint8_t *p;
	size_t size;
	size_t pos;
	const char *file;
	char what[192]; /* the field being read, for error messages */
};

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* Copy a name from the file into buf for an error message: bounded, and
 * non-printable bytes shown as '?' so a hostile name cannot garble a terminal. */
static const char *show(char *buf, size_t cap, const char *s, uint64_t len)
{
	size_t n = len < cap - 1 ? (size_t)len : cap - 1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		buf[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	buf[n] = 0;
	if (len > n && n >= 3)
		memcpy(buf + n - 3, "...", 3);
	return buf;
}

static int rd_need(struct rd *r, uint64_t n)
{
	if (n > r->size - r->pos)
		return err_set(ERR_RANGE, "%s: %s: truncated: need %llu bytes at offset %zu, file has %zu",
			       r->file, r->what, (unsigned long long)n, r->pos, r->size);
	return 0;
}

static int rd_u32(struct rd *r, uint32_t *v)
{
	int rc = rd_need(r, 4);
	if (rc)
		return rc;
	*v = le32(r->p + r->pos);
	r->pos += 4;
	return 0;
}

static int rd_u64(struct rd *r, uint64_t *v)
{
	int rc = rd_need(r, 8);
	if (rc)
		return rc;
	*v = le64(r->p + r->pos);
	r->pos += 8;
	return 0;
}

static int rd_str(struct rd *r, uint64_t max, struct gguf_str *s)
{
	uint64_t len;
	int rc = rd_u64(r, &len);
	if (rc)
		return rc;
	if (len > max)
		return err_set(ERR_RANGE, "%s: %s: string length %llu exceeds the limit %llu",
			       r->file, r->what, (unsigned long long)len, (unsigned long long)max);
	if ((rc = rd_need(r, len)))
		return rc;
	s->len = len;
	s->ptr = (const char *)r->p + r->pos;
	r->pos += len;
	return 0;
}

size_t gguf_vtype_size(uint32_t t)
{
	switch (t) {
	case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
	case GGUF_U16: case GGUF_I16: return 2;
	case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
	case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
	}
	return 0;
}

const char *gguf_vtype_name(uint32_t t)
{
	static const char *const names[] = {
		"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
	};
	return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static int is_unsigned(uint32_t t)
{
	return t == GGUF_U8 || t == GGUF_U16 || t == GGUF_U32 || t == GGUF_U64;
}

static int is_signed(uint32_t t)
{
	return t == GGUF_I8 || t == GGUF_I16 || t == GGUF_I32 || t == GGUF_I64;
}

static int is_float(uint32_t t)
{
	return t == GGUF_F32 || t == GGUF_F64;
}

/* Decode one scalar whose gguf_vtype_size(t) bytes at p are known to exist. */
static void decode_scalar(uint32_t t, const uint8_t *p, struct gguf_value *v)
{
	v->type = t;
	switch (t) {
	case GGUF_U8: case GGUF_BOOL: v->u = p[0]; break;
	case GGUF_I8: v->i = (int8_t)p[0]; break;
	case GGUF_U16: v->u = le16(p); break;
	case GGUF_I16: v->i = (int16_t)le16(p); break;
	case GGUF_U32: v->u = le32(p); break;
	case GGUF_I32: v->i = (int32_t)le32(p); break;
	case GGUF_U64: v->u = le64(p); break;
	case GGUF_I64: v->i = (int64_t)le64(p); break;
	case GGUF_F32: {
		uint32_t b = le32(p);
		float f;
		memcpy(&f, &b, sizeof f);
		v->f = f;
		break;
	}
	case GGUF_F64: {
		uint64_t b = le64(p);
		memcpy(&v->f, &b, sizeof v->f);
		break;
	}
	}
}

static int read_array(struct rd *r, struct gguf_array *a, int depth);

/* Array elements of a string or array type: walk them (recording where each
 * starts in a->offsets when a is given, i.e. for top-level arrays). */
static int read_var_elems(struct rd *r, uint32_t type, uint64_t n, struct gguf_array *a, int depth)
{
	size_t start = r->pos;
	uint64_t min = type == GGUF_STRING ? 8 : MIN_ARRAY_BYTES;
	/* n <= GGUF_MAX_ARRAY, so n * min cannot overflow; checking it first
	 * bounds the offsets table by the input size. */
	if (n * min > r->size - r->pos)
		return err_set(ERR_RANGE, "%s: %s: truncated: %llu elements of type %s need at least %llu bytes, %zu remain",
			       r->file, r->what, (unsigned long long)n, gguf_vtype_name(type),
			       (unsigned long long)(n * min), r->size - r->pos);
	uint64_t *off = NULL;
	if (a) {
		off = malloc((size_t)(n + 1) * sizeof *off);
		if (!off)
			return err_set(ERR_NOMEM, "%s: %s: no memory for %llu array offsets", r->file, r->what,
				       (unsigned long long)n + 1);
		a->offsets = off;
	}
	for (uint64_t i = 0; i < n; i++) {
		if (off)
			off[i] = r->pos - start;
		if (type == GGUF_STRING) {
			/* Inline rd_str: this loop runs 262144 times for a vocab. */
			if (r->size - r->pos < 8)
				return err_set(ERR_RANGE, "%s: %s: element %llu: truncated string length",
					       r->file, r->what, (unsigned long long)i);
			uint64_t len = le64(r->p + r->pos);
			r->pos += 8;
			if (len > GGUF_MAX_STRING)
				return err_set(ERR_RANGE, "%s: %s: element %llu: string length %llu exceeds the limit %u",
					       r->file, r->what, (unsigned long long)i, (unsigned long long)len,
					       GGUF_MAX_STRING);
			if (len > r->size - r->pos)
				return err_set(ERR_RANGE, "%s: %s: element %llu: truncated: string of %llu bytes at offset %zu, file has %zu",
					       r->file, r->what, (unsigned long long)i, (unsigned long long)len,
					       r->pos, r->size);
			r->pos += len;
		} else {
			/* Errors inside name the innermost element only. */
			int rc = read_array(r, NULL, depth + 1);
			if (rc)
				return rc;
		}
	}
	if (off)
		off[n] = r->pos - start;
	return 0;
}

/* Read an array value (element type, count, elements) at r->pos. a is NULL for
 * nested arrays, which are validated and skipped. */
static int read_array(struct rd *r, struct gguf_array *a, int depth)
{
	uint32_t type;
	uint64_t n;
	int rc;
	if (depth > GGUF_MAX_NEST)
		return err_set(ERR_UNSUP, "%s: %s: arrays nested deeper than %d levels", r->file, r->what,
			       GGUF_MAX_NEST);
	if ((rc = rd_u32(r, &type)) || (rc = rd_u64(r, &n)))
		return rc;
	if (type > GGUF_F64)
		return err_set(ERR_INVAL, "%s: %s: unknown array element type %u", r->file, r->what, type);
	if (n > GGUF_MAX_ARRAY)
		return err_set(ERR_RANGE, "%s: %s: array of %llu elements exceeds the limit %u", r->file, r->what,
			       (unsigned long long)n, GGUF_MAX_ARRAY);
	if (a) {
		a->type = type;
		a->n = n;
		a->data = r->p + r->pos;
		a->offsets = NULL;
	}
	if (type == GGUF_STRING || type == GGUF_ARRAY)
		return read_var_elems(r, type, n, a, depth);
	uint64_t bytes = n * gguf_vtype_size(type); /* <= 2^24 * 8 */
	if ((rc = rd_need(r, bytes)))
		return rc;
	if (type == GGUF_BOOL) {
		for (uint64_t i = 0; i < n; i++)
			if (r->p[r->pos + i] > 1)
				return err_set(ERR_INVAL, "%s: %s: element %llu: bool value %u is not 0 or 1", r->file,
					       r->what, (unsigned long long)i, r->p[r->pos + i]);
	}
	r->pos += bytes;
	return 0;
}

static int read_value(struct rd *r, uint32_t type, struct gguf_value *v)
{
	int rc;
	v->type = type;
	if (type == GGUF_STRING)
		return rd_str(r, GGUF_MAX_STRING, &v->s);
	if (type == GGUF_ARRAY)
		return read_array(r, &v->arr, 0);
	size_t sz = gguf_vtype_size(type);
	if (!sz)
		return err_set(ERR_INVAL, "%s: %s: unknown value type %u", r->file, r->what, type);
	if ((rc = rd_need(r, sz)))
		return rc;
	if (type == GGUF_BOOL && r->p[r->pos] > 1)
		return err_set(ERR_INVAL, "%s: %s: bool value %u is not 0 or 1", r->file, r->what, r->p[r->pos]);
	decode_scalar(type, r->p + r->pos, v);
	r->pos += sz;
	return 0;
}

static int cmp_bytes(const char *a, uint64_t alen, const char *b, uint64_t blen)
{
	int c = memcmp(a, b, alen < blen ? (size_t)alen : (size_t)blen);
	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

static int cmp_kv(const void *a, const void *b)
{
	const struct gguf_kv *x = *(const struct gguf_kv *const *)a, *y = *(const struct gguf_kv *const *)b;
	return cmp_bytes(x->key.ptr, x->key.len, y->key.ptr, y->key.len);
}

static int cmp_tensor_name(const void *a, const void *b)
{
	const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
	const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
	return strcmp(x->name, y->name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
	const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
	const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int parse_kvs(struct gguf_priv *gp, struct rd *r)
{
	struct gguf *g = &gp->pub;
	char kb[80];
	int rc;
	for (uint64_t i = 0; i < g->n_kv; i++) {
		struct gguf_kv *kv = &g->kv[i];
		uint32_t type;
		snprintf(r->what, sizeof r->what, "kv %llu key", (unsigned long long)i);
		if ((rc = rd_str(r, GGUF_MAX_KEY, &kv->key)))
			return rc;
		snprintf(r->what, sizeof r->what, "key '%s'", show(kb, sizeof kb, kv->key.ptr, kv->key.len));
		if ((rc = rd_u32(r, &type)) || (rc = read_value(r, type, &kv->val)))
			return rc;
	}
	if (!g->n_kv)
		return 0;
	gp->kv_by_key = malloc((size_t)g->n_kv * sizeof *gp->kv_by_key);
	if (!gp->kv_by_key)
		return err_set(ERR_NOMEM, "%s: no memory for the key index", r->file);
	for (uint64_t i = 0; i < g->n_kv; i++)
		gp->kv_by_key[i] = &g->kv[i];
	qsort(gp->kv_by_key, (size_t)g->n_kv, sizeof *gp->kv_by_key, cmp_kv);
	for (uint64_t i = 1; i < g->n_kv; i++)
		if (!cmp_kv(&gp->kv_by_key[i - 1], &gp->kv_by_key[i]))
			return err_set(ERR_INVAL, "%s: key '%s': duplicate key", r->file,
				       show(kb, sizeof kb, gp->kv_by_key[i]->key.ptr, gp->kv_by_key[i]->key.len));
	return 0;
}

static int parse_alignment(struct gguf *g, const char *file)
{
	const struct gguf_kv *kv = gguf_find(g, "general.alignment");
	g->alignment = GGUF_DEFAULT_ALIGNMENT;
	if (!kv)
		return 0;
	if (kv->val.type != GGUF_U32)
		return err_set(ERR_INVAL, "%s: key 'general.alignment': type %s, expected u32", file,
			       gguf_vtype_name(kv->val.type));
	uint64_t a = kv->val.u;
	if (a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT)
		return err_set(ERR_INVAL, "%s: key 'general.alignment': %llu is not a power of two in [1, %u]", file,
			       (unsigned long long)a, GGUF_MAX_ALIGNMENT);
	g->alignment = (uint32_t)a;
	return 0;
}

/* One tensor info: name, dims, type, offset; computes the byte size. */
static int parse_tensor_info(struct rd *r, uint64_t i, struct gguf_tensor *t)
{
	struct gguf_str name;
	char nb[80];
	int rc;
	snprintf(r->what, sizeof r->what, "tensor %llu name", (unsigned long long)i);
	if ((rc = rd_u64(r, &name.len)))
		return rc;
	if (name.len > GGUF_MAX_NAME)
		return err_set(ERR_RANGE, "%s: tensor %llu: name length %llu exceeds %d bytes", r->file,
			       (unsigned long long)i, (unsigned long long)name.len, GGUF_MAX_NAME);
	if ((rc = rd_need(r, name.len)))
		return rc;
	name.ptr = (const char *)r->p + r->pos;
	r->pos += name.len;
	/* The name is kept NUL-terminated; an embedded NUL would make two
	 * different file names look equal to every C string consumer. */
	if (memchr(name.ptr, 0, (size_t)name.len))
		return err_set(ERR_INVAL, "%s: tensor %llu '%s': name contains a NUL byte", r->file,
			       (unsigned long long)i, show(nb, sizeof nb, name.ptr, name.len));
	memcpy(t->name, name.ptr, (size_t)name.len);
	t->name[name.len] = 0;
	snprintf(r->what, sizeof r->what, "tensor '%s'", show(nb, sizeof nb, name.ptr, name.len));

	if ((rc = rd_u32(r, &t->n_dims)))
		return rc;
	if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
		return err_set(ERR_INVAL, "%s: %s: n_dims %u not in 1..%d", r->file, r->what, t->n_dims, GGUF_MAX_DIMS);
	uint64_t nelem = 1;
	for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
		t->ne[d] = 1;
		if (d >= t->n_dims)
			continue;
		if ((rc = rd_u64(r, &t->ne[d])))
			return rc;
		if (t->ne[d] == 0)
			return err_set(ERR_INVAL, "%s: %s: dimension %u is 0", r->file, r->what, d);
		/* ggml keeps element counts in int64_t. */
		if (t->ne[d] > (uint64_t)INT64_MAX / nelem)
			return err_set(ERR_RANGE, "%s: %s: element count overflows (dimension %u = %llu)", r->file,
				       r->what, d, (unsigned long long)t->ne[d]);
		nelem *= t->ne[d];
	}
	if ((rc = rd_u32(r, &t->type)) || (rc = rd_u64(r, &t->offset)))
		return rc;
	const struct quant_type_info *qi = quant_type_info(t->type);
	if (!qi || !qi->block_elems || !qi->block_bytes) {
		/* Name the type: users compare it with the preset they downloaded. */
		const char *gn = quant_ggml_type_name(t->type);
		if (!gn)
			return err_set(ERR_UNSUP, "%s: %s has unknown type %u (not a ggml type); Unicorn runs %s",
				       r->file, r->what, t->type, quant_supported_list());
		return err_set(ERR_UNSUP, "%s: %s is %s (type %u), which Unicorn cannot run yet; it runs %s", r->file,
			       r->what, gn, t->type, quant_supported_list());
	}
	if (t->ne[0] % qi->block_elems)
		return err_set(ERR_INVAL, "%s: %s: ne[0] = %llu is not a multiple of the %s block size %u", r->file,
			       r->what, (unsigned long long)t->ne[0], qi->name, qi->block_elems);
	uint64_t blocks = nelem / qi->block_elems;
	if (blocks > UINT64_MAX / qi->block_bytes)
		return err_set(ERR_RANGE, "%s: %s: byte size overflows (%llu elements of %s)", r->file, r->what,
			       (unsigned long long)nelem, qi->name);
	t->nbytes = blocks * qi->block_bytes;
	return 0;
}

static int parse_tensors(struct gguf_priv *gp, struct rd *r)
{
	struct gguf *g = &gp->pub;
	int rc;
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if ((rc = parse_tensor_info(r, i, &g->tensors[i])))
			return rc;

	uint64_t a = g->alignment;
	uint64_t end = r->pos;
	g->data_offset = end + (a - end % a) % a;
	if (g->data_offset > r->size) {
		if (g->n_tensors)
			return err_set(ERR_RANGE, "%s: data section: starts at %llu, past the end of the file (%zu bytes)",
				       r->file, (unsigned long long)g->data_offset, r->size);
		/* No tensors: writers may omit the final padding; keep
		 * base + data_offset a valid (end) pointer. */
		g->data_offset = r->size;
	}
	if (!g->n_tensors)
		return 0;
	uint64_t data_size = r->size - g->data_offset;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct gguf_tensor *t = &g->tensors[i];
		if (t->offset % a)
			return err_set(ERR_INVAL, "%s: tensor '%s': offset %llu not aligned to %llu", r->file, t->name,
				       (unsigned long long)t->offset, (unsigned long long)a);
		if (t->offset > data_size || t->nbytes > data_size - t->offset)
			return err_set(ERR_RANGE, "%s: tensor '%s': data at offset %llu size %llu lies outside the data section (%llu bytes)",
				       r->file, t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
				       (unsigned long long)data_size);
		t->data = r->p + g->data_offset + t->offset;
	}

	gp->t_by_name = malloc((size_t)g->n_tensors * sizeof *gp->t_by_name);
	const struct gguf_tensor **by_off = malloc((size_t)g->n_tensors * sizeof *by_off);
	if (!gp->t_by_name || !by_off) {
		free(by_off);
		return err_set(ERR_NOMEM, "%s: no memory for the tensor index", r->file);
	}
	for (uint64_t i = 0; i < g->n_tensors; i++)
		gp->t_by_name[i] = by_off[i] = &g->tensors[i];
	qsort(gp->t_by_name, (size_t)g->n_tensors, sizeof *gp->t_by_name, cmp_tensor_name);
	qsort(by_off, (size_t)g->n_tensors, sizeof *by_off, cmp_tensor_offset);
	rc = 0;
	for (uint64_t i = 1; i < g->n_tensors && !rc; i++) {
		if (!strcmp(gp->t_by_name[i - 1]->name, gp->t_by_name[i]->name))
			rc = err_set(ERR_INVAL, "%s: tensor '%s': duplicate tensor name", r->file, gp->t_by_name[i]->name);
		const struct gguf_tensor *p = by_off[i - 1], *q = by_off[i];
		/* Sizes were bounds-checked, so p->offset + p->nbytes cannot overflow. */
		if (!rc && p->offset + p->nbytes > q->offset)
			rc = err_set(ERR_INVAL, "%s: tensor '%s': data [%llu, %llu) overlaps tensor '%s' [%llu, %llu)",
				     r->file, q->name, (unsigned long long)q->offset,
				     (unsigned long long)(q->offset + q->nbytes), p->name, (unsigned long long)p->offset,
				     (unsigned long long)(p->offset + p->nbytes));
	}
	free(by_off);
	return rc;
}

int gguf_parse(const void *data, size_t size, const char *name, struct gguf **out)
{
	struct rd r = {.p = data, .size = size, .file = name ? name : "<buffer>"};
	uint64_t n_tensors, n_kv;
	int rc;
	if (!out)
		return err_set(ERR_INVAL, "%s: gguf_parse: out is NULL", r.file);
	*out = NULL;
	if (!data && size)
		return err_set(ERR_INVAL, "%s: gguf_parse: data is NULL", r.file);
	if (!size)
		return err_set(ERR_INVAL, "%s: empty file", r.file);

	struct gguf_priv *gp = calloc(1, sizeof *gp);
	if (!gp)
		return err_set(ERR_NOMEM, "%s: no memory", r.file);
	struct gguf *g = &gp->pub;
	g->base = data;
	g->size = size;
	g->path = strdup(r.file);
	if (!g->path) {
		rc = err_set(ERR_NOMEM, "%s: no memory", r.file);
		goto out_free;
	}

	snprintf(r.what, sizeof r.what, "header");
	if ((rc = rd_need(&r, 4)))
		goto out_free;
	if (memcmp(r.p, "GGUF", 4)) {
		rc = err_set(ERR_INVAL, "%s: header: bad magic %02x %02x %02x %02x (expected \"GGUF\")", r.file, r.p[0],
			     r.p[1], r.p[2], r.p[3]);
		goto out_free;
	}
	r.pos = 4;
	if ((rc = rd_u32(&r, &g->version)))
		goto out_free;
	if (g->version != 2 && g->version != 3) {
		rc = err_set(ERR_UNSUP, "%s: header: version %u not supported (only 2 and 3%s)", r.file, g->version,
			     g->version == 0x03000000u || g->version == 0x02000000u ? "; big-endian file?" : "");
		goto out_free;
	}
	if ((rc = rd_u64(&r, &n_tensors)) || (rc = rd_u64(&r, &n_kv)))
		goto out_free;
	if (n_tensors > GGUF_MAX_TENSORS) {
		rc = err_set(ERR_RANGE, "%s: header: tensor count %llu exceeds the limit %u", r.file,
			     (unsigned long long)n_tensors, GGUF_MAX_TENSORS);
		goto out_free;
	}
	if (n_kv > GGUF_MAX_KV) {
		rc = err_set(ERR_RANGE, "%s: header: metadata kv count %llu exceeds the limit %u", r.file,
			     (unsigned long long)n_kv, GGUF_MAX_KV);
		goto out_free;
	}
	/* Bound the allocations below by the input size. */
	uint64_t min = n_kv * MIN_KV_BYTES + n_tensors * MIN_TENSOR_BYTES;
	if (min > r.size - r.pos) {
		rc = err_set(ERR_RANGE, "%s: header: truncated: %llu kv pairs and %llu tensor infos need at least %llu bytes, %zu remain",
			     r.file, (unsigned long long)n_kv, (unsigned long long)n_tensors, (unsigned long long)min,
			     r.size - r.pos);
		goto out_free;
	}
	g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
	g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
	if (!g->kv || !g->tensors) {
		rc = err_set(ERR_NOMEM, "%s: no memory for %llu kv pairs and %llu tensors", r.file,
			     (unsigned long long)n_kv, (unsigned long long)n_tensors);
		goto out_free;
	}
	g->n_kv = n_kv;
	g->n_tensors = n_tensors;
	if ((rc = parse_kvs(gp, &r)) || (rc = parse_alignment(g, r.file)) || (rc = parse_tensors(gp, &r)))
		goto out_free;
	*out = g;
	return 0;

out_free:
	gguf_close(g);
	return rc;
}

int gguf_open(const char *path, struct gguf **out)
{
	struct stat st;
	int rc;
	if (!out)
		return err_set(ERR_INVAL, "%s: gguf_open: out is NULL", path ? path : "(null)");
	*out = NULL;
	if (!path)
		return err_set(ERR_INVAL, "gguf_open: path is NULL");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "%s: open: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		rc = err_set(ERR_IO, "%s: fstat: %s", path, strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = err_set(ERR_IO, "%s: not a regular file", path);
		goto out_close;
	}
	if (st.st_size == 0) {
		/* mmap of length 0 fails; say what is actually wrong. */
		rc = err_set(ERR_INVAL, "%s: empty file", path);
		goto out_close;
	}
	if ((uint64_t)st.st_size > SIZE_MAX) {
		rc = err_set(ERR_RANGE, "%s: file of %llu bytes does not fit in memory", path,
			     (unsigned long long)st.st_size);
		goto out_close;
	}
	size_t size = (size_t)st.st_size;
	void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED) {
		rc = err_set(ERR_IO, "%s: mmap: %s", path, strerror(errno));
		goto out_close;
	}
	close(fd);
	rc = gguf_parse(m, size, path, out);
	if (rc) {
		munmap(m, size);
		return rc;
	}
	(*out)->mapped = 1;
	return 0;

out_close:
	close(fd);
	return rc;
}

void gguf_close(struct gguf *g)
{
	if (!g)
		return;
	struct gguf_priv *gp = (struct gguf_priv *)g;
	if (g->kv)
		for (uint64_t i = 0; i < g->n_kv; i++)
			if (g->kv[i].val.type == GGUF_ARRAY)
				free(g->kv[i].val.arr.offsets);
	free(g->kv);
	free(g->tensors);
	free(gp->kv_by_key);
	free(gp->t_by_name);
	if (g->mapped && g->base)
		munmap((void *)g->base, g->size);
	free(g->path);
	free(gp);
}

const struct gguf_kv *gguf_find(const struct gguf *g, const char *key)
{
	if (!g || !key || !g->n_kv)
		return NULL;
	const struct gguf_priv *gp = (const struct gguf_priv *)g;
	struct gguf_kv probe = {.key = {.len = strlen(key), .ptr = key}};
	const struct gguf_kv *pp = &probe;
	const struct gguf_kv *const *hit =
		bsearch(&pp, gp->kv_by_key, (size_t)g->n_kv, sizeof *gp->kv_by_key, cmp_kv);
	return hit ? *hit : NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name)
{
	if (!g || !name || !g->n_tensors || strlen(name) > GGUF_MAX_NAME)
		return NULL;
	const struct gguf_priv *gp = (const struct gguf_priv *)g;
	struct gguf_tensor probe;
	strcpy(probe.name, name);
	const struct gguf_tensor *pp = &probe;
	const struct gguf_tensor *const *hit =
		bsearch(&pp, gp->t_by_name, (size_t)g->n_tensors, sizeof *gp->t_by_name, cmp_tensor_name);
	return hit ? *hit : NULL;
}

static int get_kv(const struct gguf *g, const char *key, const struct gguf_kv **kv)
{
	if (!g || !key)
		return err_set(ERR_INVAL, "gguf: NULL file or key");
	*kv = gguf_find(g, key);
	if (!*kv)
		return err_set(ERR_NOTFOUND, "%s: key '%s': not found", g->path, key);
	return 0;
}

static int wrong_type(const struct gguf *g, const char *key, uint32_t t, const char *want)
{
	return err_set(ERR_INVAL, "%s: key '%s': type %s, expected %s", g->path, key, gguf_vtype_name(t), want);
}

int gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out)
{
	const struct gguf_kv *kv;
	int rc = get_kv(g, key, &kv);
	if (rc)
		return rc;
	uint32_t t = kv->val.type;
	if (is_unsigned(t)) {
		*out = kv->val.u;
		return 0;
	}
	if (!is_signed(t))
		return wrong_type(g, key, t, "an integer");
	if (kv->val.i < 0)
		return err_set(ERR_INVAL, "%s: key '%s': negative value %lld where an unsigned one is needed", g->path,
			       key, (long long)kv->val.i);
	*out = (uint64_t)kv->val.i;
	return 0;
}

int gguf_get_f64(const struct gguf *g, const char *key, double *out)
{
	const struct gguf_kv *kv;
	int rc = get_kv(g, key, &kv);
	if (rc)
		return rc;
	uint32_t t = kv->val.type;
	if (is_unsigned(t))
		*out = (double)kv->val.u;
	else if (is_signed(t))
		*out = (double)kv->val.i;
	else if (is_float(t))
		*out = kv->val.f;
	else
		return wrong_type(g, key, t, "a number");
	return 0;
}

int gguf_get_bool(const struct gguf *g, const char *key, bool *out)
{
	const struct gguf_kv *kv;
	int rc = get_kv(g, key, &kv);
	if (rc)
		return rc;
	if (kv->val.type != GGUF_BOOL)
		return wrong_type(g, key, kv->val.type, "bool");
	*out = kv->val.u != 0;
	return 0;
}

int gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out)
{
	const struct gguf_kv *kv;
	int rc = get_kv(g, key, &kv);
	if (rc)
		return rc;
	if (kv->val.type != GGUF_STRING)
		return wrong_type(g, key, kv->val.type, "string");
	*out = kv->val.s;
	return 0;
}

int gguf_get_arr(const struct gguf *g, const char *key, const struct gguf_array **out)
{
	const struct gguf_kv *kv;
	int rc = get_kv(g, key, &kv);
	if (rc)
		return rc;
	if (kv->val.type != GGUF_ARRAY)
		return wrong_type(g, key, kv->val.type, "array");
	*out = &kv->val.arr;
	return 0;
}

static int arr_check(const struct gguf_array *a, uint64_t i)
{
	if (!a)
		return err_set(ERR_INVAL, "gguf array: NULL array");
	if (i >= a->n)
		return err_set(ERR_RANGE, "gguf array: index %llu out of range (%llu elements)", (unsigned long long)i,
			       (unsigned long long)a->n);
	return 0;
}

int gguf_arr_str(const struct gguf_array *a, uint64_t i, struct gguf_str *out)
{
	int rc = arr_check(a, i);
	if (rc)
		return rc;
	if (a->type != GGUF_STRING)
		return err_set(ERR_INVAL, "gguf array: elements are %s, not string", gguf_vtype_name(a->type));
	if (!a->offsets)
		return err_set(ERR_STATE, "gguf array: no offsets table (nested array?)");
	const uint8_t *p = a->data + a->offsets[i];
	out->len = le64(p);
	out->ptr = (const char *)p + 8;
	return 0;
}

int gguf_arr_f64(const struct gguf_array *a, uint64_t i, double *out)
{
	int rc = arr_check(a, i);
	if (rc)
		return rc;
	uint32_t t = a->type;
	if (!is_unsigned(t) && !is_signed(t) && !is_float(t))
		return err_set(ERR_INVAL, "gguf array: elements are %s, not numbers", gguf_vtype_name(t));
	struct gguf_value v;
	decode_scalar(t, a->data + i * gguf_vtype_size(t), &v);
	*out = is_unsigned(t) ? (double)v.u : is_signed(t) ? (double)v.i : v.f;
	return 0;
}

int gguf_arr_i64(const struct gguf_array *a, uint64_t i, int64_t *out)
{
	int rc = arr_check(a, i);
	if (rc)
		return rc;
	uint32_t t = a->type;
	if (!is_unsigned(t) && !is_signed(t) && t != GGUF_BOOL)
		return err_set(ERR_INVAL, "gguf array: elements are %s, not integers", gguf_vtype_name(t));
	struct gguf_value v;
	decode_scalar(t, a->data + i * gguf_vtype_size(t), &v);
	if (is_signed(t)) {
		*out = v.i;
		return 0;
	}
	if (v.u > (uint64_t)INT64_MAX)
		return err_set(ERR_RANGE, "gguf array: element %llu = %llu does not fit in int64", (unsigned long long)i,
			       (unsigned long long)v.u);
	*out = (int64_t)v.u;
	return 0;
}
