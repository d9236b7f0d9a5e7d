/* libFuzzer target: the safetensors parser on raw bytes, both as a whole file
 * image (length prefix + header + data) and as a bare JSON header. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct safetensors_file *f;
	if (safetensors_parse(data, size, "fuzz.safetensors", &f) == 0) {
		/* Every tensor the parser accepts must lie inside the buffer. */
		for (size_t i = 0; i < f->n_tensors; i++) {
			const struct safetensors_tensor *t = &f->tensors[i];
			if (t->data < data || t->data + (t->end - t->begin) > data + size)
				__builtin_trap();
			volatile uint8_t sink = 0;
			if (t->end > t->begin)
				sink ^= t->data[t->end - t->begin - 1];
			(void)sink;
			if (safetensors_find(f, t->name) != t)
				__builtin_trap();
		}
		safetensors_close(f);
	}
	/* Header-only entry: the first 8 bytes (if any) choose the data size. */
	uint64_t data_size = 0;
	if (size >= 8) {
		memcpy(&data_size, data, 8);
		data += 8;
		size -= 8;
	}
	if (safetensors_parse_header((const char *)data, size, data_size, "fuzz-header", &f) == 0)
		safetensors_close(f);
	return 0;
}
