/* safetensors: read-only parser for Hugging Face .safetensors files and
 * sharded checkpoints (model.safetensors.index.json).
 *
 * Layout: u64 little-endian header length N, N bytes of JSON object
 * {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {..}},
 * then the data section. Every size and offset is checked before anything
 * points into the mapping; errors name the file and the field (err_msg()).
 * See ../shared/spec/reference.md §4. */
#ifndef UNICORN_SAFETENSORS_H
#define UNICORN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define SAFETENSORS_MAX_HEADER (100u * 1000u * 1000u) /* reference impl's cap */
#define SAFETENSORS_PARSE_MAX_DIMS 8
#define SAFETENSORS_MAX_NAME 1024                     /* bytes in a tensor name */
#define SAFETENSORS_MAX_SHARDS 4096

enum safetensors_dtype {
	ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_I16, ST_U16, ST_F16, ST_BF16,
	ST_I32, ST_U32, ST_F32, ST_F64, ST_I64, ST_U64,
	ST_DTYPE_COUNT
};

struct safetensors_tensor {
	char *name;                         /* NUL-terminated copy */
	uint32_t dtype;                     /* enum safetensors_dtype */
	uint32_t n_dims;
	uint64_t shape[SAFETENSORS_PARSE_MAX_DIMS]; /* outermost first (row-major) */
	uint64_t begin, end;                /* relative to the data section, end exclusive */
	const uint8_t *data;                /* into the mapping; NULL after a header-only parse */
};

struct safetensors_meta {
	char *key, *value;
};

struct safetensors_file {
	char *path;                         /* name used in error messages */
	const uint8_t *base;
	size_t size;
	int mapped;                         /* base is our mmap (unmapped on close) */
	uint64_t header_len;
	uint64_t data_offset;               /* 8 + header_len */
	size_t n_meta;
	struct safetensors_meta *meta;
	size_t n_tensors;
	struct safetensors_tensor *tensors; /* sorted by name */
};

/* A checkpoint: one file, or the shards named by an index. */
struct safetensors_set {
	char *path;                         /* the .safetensors or .index.json */
	size_t n_files;
	struct safetensors_file **files;
	size_t n_tensors;
	const struct safetensors_tensor **tensors; /* every tensor of the checkpoint */
	size_t *tensor_file;                /* tensors[i] lives in files[tensor_file[i]] */
};

/* Element size in bytes of a dtype (0 for an unknown id). */
size_t safetensors_dtype_size(uint32_t dtype);
const char *safetensors_dtype_str(uint32_t dtype);
/* "F32" -> ST_F32; ERR_UNSUP for an unknown name. */
int safetensors_dtype_parse(const char *name, uint32_t *dtype);
/* Engine tensor type (formats/quant.h) for F32/F16/BF16; ERR_UNSUP otherwise. */
int safetensors_dtype_to_tensor_type(uint32_t dtype, uint32_t *type);

/* Parse only the JSON header (len bytes, not NUL-terminated) against a data
 * section of data_size bytes. Tensor data pointers stay NULL. For fuzzing. */
int safetensors_parse_header(const char *json, size_t len, uint64_t data_size, const char *name,
			     struct safetensors_file **out);
/* Parse a whole file image the caller keeps alive until safetensors_close. */
int safetensors_parse(const void *data, size_t size, const char *name,
		      struct safetensors_file **out);
/* mmap path read-only and parse it. */
int safetensors_open(const char *path, struct safetensors_file **out);
void safetensors_close(struct safetensors_file *f);
const struct safetensors_tensor *safetensors_find(const struct safetensors_file *f, const char *name);
/* Value of a __metadata__ key or NULL. */
const char *safetensors_meta(const struct safetensors_file *f, const char *key);

/* Open a checkpoint: path is a .safetensors file or a *.index.json naming
 * shards in the same directory (each opened once). */
int safetensors_set_open(const char *path, struct safetensors_set **out);
/* Parse an index's JSON text; dir is the folder holding the shards. */
int safetensors_set_open_index(const char *json, size_t len, const char *index_path,
			       const char *dir, struct safetensors_set **out);
void safetensors_set_close(struct safetensors_set *s);

#endif
