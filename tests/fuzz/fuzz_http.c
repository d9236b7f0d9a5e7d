/* libFuzzer target: the API's request path before libmicrohttpd, gate_check
 * (api/gate.h) on arbitrary bytes, as the gate peeks them: every prefix of
 * a head the gate accepts (or refuses) must have been "more" or the same
 * refusal, an accepted head ends in an empty line within the bytes seen, and
 * a verdict never changes once given (more bytes or EOF). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api/gate.c" /* api/ is not in the fuzz targets' library (Makefile FUZZ_LIB_C) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *b = (const char *)data;
	struct gate_head g, h;
	int v = gate_check(b, size, false, &g);
	if (v < GATE_MORE || v > GATE_VERSION)
		__builtin_trap();
	if (v == GATE_OK) {
		if (g.head_len < 4 || g.head_len > size || g.head_len > GATE_MAX_HEAD || b[g.head_len - 1] != '\n')
			__builtin_trap();
		/* the bytes after the head (a body, pipelining) do not matter */
		if (gate_check(b, g.head_len, false, &h) != GATE_OK || h.head_len != g.head_len ||
		    h.health != g.health || h.metrics != g.metrics)
			__builtin_trap();
	} else if (v != GATE_MORE) {
		const char *reason;
		if (gate_status(v, &reason) < 400 || !g.why)
			__builtin_trap();
	}
	/* EOF: an incomplete head is refused, a verdict stays */
	int e = gate_check(b, size, true, &h);
	if (v == GATE_MORE ? e != GATE_BAD && e != GATE_HEAD_LARGE : e != v)
		__builtin_trap();
	/* a verdict other than "more" on a prefix is the verdict on the whole
	 * (a head too large may still meet a refusal further on) */
	if (size > 1) {
		int p = gate_check(b, size / 2, false, &h);
		if (p != GATE_MORE && p != GATE_HEAD_LARGE && p != v)
			__builtin_trap();
	}
	return 0;
}
