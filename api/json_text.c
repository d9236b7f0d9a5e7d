/* json_text: see json_text.h. */
#include "api/json_text.h"

#include <stdlib.h>

#include "common/utf8.h"

json_t *json_text(const char *text, size_t len)
{
	if (!text)
		return json_string("");
	json_t *s = json_stringn(text, len);
	if (s)
		return s;
	char *t;
	size_t n;
	if (utf8_sanitize(text, len, &t, &n))
		return NULL;
	s = json_stringn(t, n);
	free(t);
	return s;
}
