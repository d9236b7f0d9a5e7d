/* libFuzzer target: JSON schema compile (constrain/schema.c) on raw bytes,
 * then the accepted schema's matcher fed the same bytes and its shortest
 * completion taken: nothing may crash, loop or grow without bound; a text
 * the matcher accepts whole must parse as JSON. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "constrain/constrain.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cs_schema *s = NULL;
	if (cs_schema_compile((const char *)data, size, &s))
		return 0;
	struct cs_state st;
	cs_state_init(s, &st);
	if (cs_state_feed(s, &st, data, size)) {
		(void)cs_state_close_len(s, &st);
		if (cs_state_complete(&st)) {
			json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
			if (!v)
				__builtin_trap();
			json_decref(v);
		}
	}
	cs_schema_free(s);
	return 0;
}
