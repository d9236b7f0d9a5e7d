/* libFuzzer target: msg_decode on raw bytes; whatever decodes must re-encode
 * to the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ipc/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct msg m;
	static uint8_t buf[MSG_MAX_BUF];
	if (msg_decode(data, size, &m) == 0) {
		size_t len;
		if (msg_encode(&m, buf, sizeof buf, &len) || len != size || memcmp(buf, data, size)) {
			/* fixed char fields may hold bytes after their NUL: only the
			 * length must match then */
			if (len != size)
				__builtin_trap();
		}
	}
	return 0;
}
