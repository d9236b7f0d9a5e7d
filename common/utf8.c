/* UTF-8 well-formedness (Unicode 15, table 3-7) and U+FFFD replacement. */
#include "common/utf8.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

size_t utf8_char_len(const unsigned char *s, size_t n, bool *partial)
{
	*partial = false;
	if (n == 0)
		return 0;
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	size_t need;
	unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
	if (c >= 0xC2 && c <= 0xDF)
		need = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		need = 3;
		if (c == 0xE0)
			lo = 0xA0; /* no overlong forms */
		else if (c == 0xED)
			hi = 0x9F; /* no surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F; /* <= U+10FFFF */
	} else
		return 0;
	for (size_t i = 1; i < need; i++) {
		if (i >= n) {
			*partial = true;
			return 0;
		}
		unsigned char b = s[i];
		if (i == 1 ? b < lo || b > hi : (b & 0xC0) != 0x80)
			return 0;
	}
	return need;
}

/* The bytes of the maximal ill-formed subpart at s (>= 1, s[0..n) not a
 * character and not an unfinished one): the longest prefix that is still a
 * well-formed start of a character. */
static size_t bad_len(const unsigned char *s, size_t n)
{
	size_t k = 1;
	bool partial;
	while (k < n && k < 3 && utf8_char_len(s, k + 1, &partial) == 0 && partial)
		k++;
	return k;
}

bool utf8_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		bool partial;
		size_t l = utf8_char_len(u + i, n - i, &partial);
		if (!l)
			return false;
		i += l;
	}
	return true;
}

size_t utf8_complete_len(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		bool partial;
		if ((u[n - back] & 0xC0) == 0x80)
			continue;
		if (utf8_char_len(u + n - back, back, &partial) == 0 && partial)
			return n - back;
		return n;
	}
	return n;
}

int utf8_sanitize(const char *s, size_t n, char **out, size_t *out_len)
{
	const unsigned char *u = (const unsigned char *)s;
	/* at most 3 output bytes per input byte */
	char *o = malloc(3 * n + 1);
	if (!o)
		return err_set(ERR_NOMEM, "utf8: out of memory");
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		bool partial;
		size_t l = utf8_char_len(u + i, n - i, &partial);
		if (l) {
			memcpy(o + k, u + i, l);
			k += l;
			i += l;
			continue;
		}
		/* an unfinished character at the end is one replacement; an
		 * ill-formed subpart is one replacement */
		size_t bad = partial ? n - i : bad_len(u + i, n - i);
		memcpy(o + k, UTF8_REPLACEMENT, 3);
		k += 3;
		i += bad;
	}
	o[k] = 0;
	*out = o;
	if (out_len)
		*out_len = k;
	return 0;
}
