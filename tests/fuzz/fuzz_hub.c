/* libFuzzer target: the Hub's file list (hostile JSON from the server), the
 * quant choice on what it accepted, and quant names read from file names. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hub/hub.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a "." or ".." component, or an empty one (leading, trailing or double '/') */
static int bad_component(const char *s)
{
	for (;;) {
		size_t k = strcspn(s, "/");
		if (k == 0 || (k == 1 && s[0] == '.') || (k == 2 && s[0] == '.' && s[1] == '.'))
			return 1;
		if (!s[k])
			return 0;
		s += k + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hub_files f;
	if (hub_files_parse((const char *)data, size, "fuzz/repo", &f))
		return 0;
	/* Accepted names must be safe to put in a URL and a path. */
	for (size_t i = 0; i < f.n; i++) {
		const char *s = f.names[i];
		if (!*s || bad_component(s) || strchr(s, '\\') ||
		    strlen(s) >= HUB_FILE_MAX)
			__builtin_trap();
		char q[HUB_QUANT_MAX];
		hub_quant_of(s, q, sizeof q);
		if (strlen(q) >= sizeof q)
			__builtin_trap();
	}
	static const char *const quants[] = { NULL, "Q4_0", "q8", "" };
	for (size_t k = 0; k < sizeof quants / sizeof quants[0]; k++) {
		struct hub_choice c;
		if (hub_choose(&f, "fuzz/repo", quants[k], &c) == 0) {
			if (!c.n || (c.kind == HUB_GGUF && c.n != 1))
				__builtin_trap();
			hub_choice_free(&c);
		}
	}
	hub_files_free(&f);
	return 0;
}
