/* safetensors_write: streaming writer for a Hugging Face checkpoint
 * (model.safetensors) and its Gemma 3 config.json.
 *
 * Like gguf_write: declare every tensor (name, dtype, shape outermost-first)
 * first, then safetensors_writer_begin_data writes the 8-byte header length and
 * the JSON header (padded with spaces to a multiple of 8), then the bytes of
 * each tensor in declaration order (no gaps, as the format requires), then
 * finish renames the temporary file into place. See spec/reference.md §4.1. */
#ifndef UNICORN_SAFETENSORS_WRITE_H
#define UNICORN_SAFETENSORS_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "formats/model.h"

#define SAFETENSORS_MAX_DIMS 4

struct safetensors_writer;

int safetensors_writer_create(const char *path, struct safetensors_writer **out);
void safetensors_writer_destroy(struct safetensors_writer *w);
/* type: TENSOR_F32, TENSOR_F16 or TENSOR_BF16 (others: ERR_UNSUP).
 * shape[0] is the outermost dimension (HF [out, in]). */
int safetensors_writer_add_tensor(struct safetensors_writer *w, const char *name, uint32_t type,
				  uint32_t n_dims, const uint64_t *shape);
int safetensors_writer_begin_data(struct safetensors_writer *w);
int safetensors_writer_write(struct safetensors_writer *w, const void *data, size_t n);
int safetensors_writer_finish(struct safetensors_writer *w);

/* "F32", "F16", "BF16"; NULL for other types. */
const char *safetensors_dtype_name(uint32_t type);

/* Write a flat Gemma 3 text config.json (Gemma3ForCausalLM, model_type
 * gemma3_text) describing cfg; torch_dtype from type. Written to a temporary
 * file and renamed into place. bos/eos/pad token ids as given. */
int safetensors_write_gemma3_config(const char *path, const struct gemma3_config *cfg, uint32_t type,
				    uint32_t bos_id, uint32_t eos_id, uint32_t pad_id);

#endif
