/* libFuzzer target for ipc/ring and the data plane's entries: arbitrary bytes
 * as a ring region written by a hostile peer (header, head/tail, lengths,
 * entries). Attaching, counting and popping must return errors, never crash
 * or read outside the region; a popped entry goes through msg_decode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "ipc/dataplane.h"
#include "ipc/msg.h"
#include "ipc/ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a region as big as one data-plane ring; the input overwrites its start */
	size_t bytes = ring_bytes(DP_ENTRY_SIZE, DP_CAPACITY);
	unsigned char *mem = aligned_alloc(RING_LINE, bytes);
	if (!mem)
		return 0;
	memset(mem, 0, bytes);
	ring_format(mem, bytes, DP_ENTRY_SIZE, DP_CAPACITY);
	size_t n = size < bytes ? size : bytes;
	/* keep a valid header half the time, so the indices and entries get fuzzed too */
	size_t skip = size && (data[0] & 1) ? 16 : 0;
	if (n > skip)
		memcpy(mem + skip, data + skip, n - skip);
	struct ring_bell bell;
	ring_bell_init(&bell);
	struct ring r;
	static struct msg m;
	if (ring_attach(&r, mem, bytes, &bell) == 0) {
		(void)ring_count(&r);
		for (int i = 0; i < 2 * DP_CAPACITY; i++)
			if (dp_recv(&r, &m) == ERR_AGAIN)
				break;
		(void)ring_push(&r, "x", 1);
	}
	free(mem);
	return 0;
}
