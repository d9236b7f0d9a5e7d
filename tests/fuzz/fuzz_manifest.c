/* libFuzzer target: manifest_load on raw bytes against a fake table of two
 * zero-filled regions (sizes from the first bytes of the input). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ipc/manifest.h"
#include "formats/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t r0[1 << 16], r1[1 << 12];
	struct manifest_region regs[2] = { { r0, sizeof r0 }, { r1, sizeof r1 } };
	for (uint32_t n = 1; n <= 2; n++) {
		struct model *m = NULL;
		if (manifest_load(data, size, regs, n, "fuzz", &m) == 0) {
			/* accepted: every tensor must lie inside a region */
			for (size_t i = 0; i < m->n_tensors; i++) {
				const uint8_t *p = m->tensors[i].data;
				uint64_t nb = m->tensors[i].nbytes;
				int in0 = p >= r0 && p + nb <= r0 + sizeof r0;
				int in1 = p >= r1 && p + nb <= r1 + sizeof r1;
				if (!in0 && !in1)
					__builtin_trap();
			}
			model_close(m);
		}
	}
	return 0;
}
