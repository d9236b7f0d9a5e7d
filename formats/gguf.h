/* gguf: read-only parser for GGUF v2/v3 model files.
 *
 * The file is mapped (or a caller-owned buffer is used) and every count, size
 * and offset is validated before anything points into it; all strings and
 * arrays in the parsed structures point into that mapping. Errors name the file
 * and the field (err_msg()). See ../shared/spec/reference.md §2. */
#ifndef UNICORN_GGUF_H
#define UNICORN_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gguf_vtype {
	GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
	GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
	GGUF_I64 = 11, GGUF_F64 = 12,
};

/* Validation caps (hostile files): */
#define GGUF_MAX_STRING (1u << 20)          /* bytes in one string (keys: 65535) */
#define GGUF_MAX_ARRAY (1u << 24)           /* elements in one array */
#define GGUF_MAX_ALIGNMENT (1u << 16)
#define GGUF_MAX_TENSORS (1u << 20)
#define GGUF_MAX_KV (1u << 16)
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 64                    /* tensor name bytes */

struct gguf_str {
	uint64_t len;
	const char *ptr; /* into the mapping; NOT NUL-terminated */
};

struct gguf_array {
	uint32_t type;          /* element type; GGUF_ARRAY for nested arrays */
	uint64_t n;
	const uint8_t *data;    /* first element in the mapping */
	/* For string arrays (and nested arrays): byte offset of element i from
	 * data, n+1 entries, built at parse time so access is O(1). NULL otherwise. */
	uint64_t *offsets;
};

struct gguf_value {
	uint32_t type;
	union {
		uint64_t u;         /* GGUF_U8..U64 and BOOL */
		int64_t i;          /* GGUF_I8..I64 (sign-extended) */
		double f;           /* GGUF_F32, GGUF_F64 */
		struct gguf_str s;
		struct gguf_array arr;
	};
};

struct gguf_kv {
	struct gguf_str key;
	struct gguf_value val;
};

struct gguf_tensor {
	char name[GGUF_MAX_NAME + 1];   /* NUL-terminated copy */
	uint32_t n_dims;
	uint64_t ne[GGUF_MAX_DIMS];     /* ne[0] fastest; unused dims are 1 */
	uint32_t type;                  /* enum tensor_type (formats/quant.h) */
	uint64_t offset;                /* relative to the data section */
	uint64_t nbytes;
	const uint8_t *data;            /* into the mapping, bounds-checked */
};

struct gguf {
	char *path;                     /* name used in error messages */
	const uint8_t *base;
	size_t size;
	int mapped;                     /* base is our mmap (unmapped on close) */
	uint32_t version;
	uint32_t alignment;
	uint64_t data_offset;           /* start of the tensor data section */
	uint64_t n_kv;
	struct gguf_kv *kv;
	uint64_t n_tensors;
	struct gguf_tensor *tensors;
};

/* Parse a buffer the caller keeps alive until gguf_close. name is used in
 * errors. Returns 0 or an ERR_* code; *out is NULL on error. */
int gguf_parse(const void *data, size_t size, const char *name, struct gguf **out);
/* mmap path read-only and parse it. */
int gguf_open(const char *path, struct gguf **out);
void gguf_close(struct gguf *g);

const struct gguf_kv *gguf_find(const struct gguf *g, const char *key);
const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name);

/* Typed getters: ERR_NOTFOUND if absent, ERR_INVAL if the type does not fit
 * (any integer width is accepted for integers; negative values fail for u64;
 * integer or float for f64). */
int gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out);
int gguf_get_f64(const struct gguf *g, const char *key, double *out);
int gguf_get_bool(const struct gguf *g, const char *key, bool *out);
int gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out);
int gguf_get_arr(const struct gguf *g, const char *key, const struct gguf_array **out);

/* Element access on an array (index checked; type must match). */
int gguf_arr_str(const struct gguf_array *a, uint64_t i, struct gguf_str *out);
int gguf_arr_f64(const struct gguf_array *a, uint64_t i, double *out);  /* numeric */
int gguf_arr_i64(const struct gguf_array *a, uint64_t i, int64_t *out); /* integer/bool */

/* Size in bytes of one scalar of type t (0 for STRING/ARRAY/unknown). */
size_t gguf_vtype_size(uint32_t t);
const char *gguf_vtype_name(uint32_t t);

#endif
