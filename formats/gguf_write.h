/* gguf_write: streaming GGUF v3 writer.
 *
 * Usage: gguf_writer_create, then add every metadata KV and every tensor info
 * (name, type, ne[]) up front, gguf_writer_begin_data (writes the header, the
 * KVs, the infos and the padding), then the bytes of each tensor in the order
 * it was declared with gguf_writer_write (any chunking; each tensor is padded to
 * the alignment when its last byte arrives), then gguf_writer_finish. Memory is
 * bounded by the serialized metadata plus whatever chunk the caller passes.
 *
 * Output goes to a temporary file next to the target, renamed into place by
 * gguf_writer_finish; gguf_writer_destroy without a successful finish removes
 * it, so a failure never leaves a half-written model behind. */
#ifndef UNICORN_GGUF_WRITE_H
#define UNICORN_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"

#define GGUF_WRITE_ALIGNMENT 32

struct gguf_writer;

int gguf_writer_create(const char *path, struct gguf_writer **out);
/* Removes the temporary file unless gguf_writer_finish succeeded. NULL ok. */
void gguf_writer_destroy(struct gguf_writer *w);

/* Metadata (before begin_data). Keys must be unique and non-empty. */
int gguf_writer_add_u8(struct gguf_writer *w, const char *key, uint8_t v);
int gguf_writer_add_i8(struct gguf_writer *w, const char *key, int8_t v);
int gguf_writer_add_u16(struct gguf_writer *w, const char *key, uint16_t v);
int gguf_writer_add_i16(struct gguf_writer *w, const char *key, int16_t v);
int gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_add_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_writer_add_u64(struct gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_add_i64(struct gguf_writer *w, const char *key, int64_t v);
int gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v);
int gguf_writer_add_f64(struct gguf_writer *w, const char *key, double v);
int gguf_writer_add_bool(struct gguf_writer *w, const char *key, bool v);
int gguf_writer_add_str(struct gguf_writer *w, const char *key, const char *v);
int gguf_writer_add_strn(struct gguf_writer *w, const char *key, const char *v, uint64_t len);
/* Array of n scalars of elem_type (GGUF_U8..GGUF_F64 except STRING/ARRAY),
 * data laid out as in the file (little-endian, bool = 1 byte). */
int gguf_writer_add_arr(struct gguf_writer *w, const char *key, uint32_t elem_type,
			const void *data, uint64_t n);
/* Array of n strings; lens may be NULL (then each string is NUL-terminated). */
int gguf_writer_add_arr_str(struct gguf_writer *w, const char *key, const char *const *strs,
			    const uint64_t *lens, uint64_t n);
/* Copy a value parsed by the GGUF reader (any type, nested arrays included). */
int gguf_writer_add_value(struct gguf_writer *w, const char *key, const struct gguf_value *v);

/* Tensor info: n_dims 1..4, ne[0] fastest; the row length must fit the type's
 * block size. */
int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type,
			   uint32_t n_dims, const uint64_t *ne);

int gguf_writer_begin_data(struct gguf_writer *w);
/* Bytes for the current tensor; a chunk may not run past its end (ERR_RANGE). */
int gguf_writer_write(struct gguf_writer *w, const void *data, size_t n);
/* Index of the tensor the next bytes belong to and how many it still needs. */
int gguf_writer_current(const struct gguf_writer *w, uint64_t *index, uint64_t *remaining);
/* All tensors complete: flush, close and rename into place. */
int gguf_writer_finish(struct gguf_writer *w);

uint64_t gguf_writer_n_tensors(const struct gguf_writer *w);
/* Total bytes the finished file will have, and the file offset of the tensor
 * data section (both valid after begin_data). */
uint64_t gguf_writer_file_size(const struct gguf_writer *w);
uint64_t gguf_writer_data_offset(const struct gguf_writer *w);

#endif
