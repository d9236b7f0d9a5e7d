/* gate: see gate.h. */
#include "api/gate.h"

#include <string.h>

static int verdict(struct gate_head *o, int v, const char *why)
{
	o->verdict = v;
	o->why = why;
	return v;
}

/* RFC 9110 tchar */
static bool tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* The end of the line starting at p (the index of its LF), or -1 when the
 * bytes up to lim hold none. A CR must be followed by LF: *bad otherwise. */
static long line_end(const char *b, size_t p, size_t lim, bool *bad)
{
	for (size_t i = p; i < lim; i++) {
		if (b[i] == '\n')
			return (long)i;
		if (b[i] == '\r' && i + 1 < lim && b[i + 1] != '\n') {
			*bad = true;
			return -1;
		}
		if (b[i] == 0) {
			*bad = true;
			return -1;
		}
	}
	return -1;
}

static bool path_is(const char *t, size_t n, const char *path)
{
	size_t k = strlen(path);
	return n >= k && !memcmp(t, path, k) && (n == k || t[k] == '?');
}

int gate_check(const char *buf, size_t n, bool eof, struct gate_head *o)
{
	memset(o, 0, sizeof *o);
	size_t p = 0;
	/* RFC 9112 2.2: empty lines before the request line are ignored */
	while (p < n && p < 64 && (buf[p] == '\r' || buf[p] == '\n'))
		p++;
	if (p >= 64)
		return verdict(o, GATE_BAD, "the request does not start with a request line");
	/* request line: METHOD SP TARGET SP HTTP/1.x */
	size_t m = p;
	while (m < n && m - p < 32 && tchar((unsigned char)buf[m]))
		m++;
	if (m < n && (buf[m] != ' ' || m == p))
		return verdict(o, GATE_BAD, "the request line is not METHOD TARGET HTTP/1.1");
	if (m - p >= 32)
		return verdict(o, GATE_BAD, "the method is longer than 31 characters");
	if (m >= n)
		goto more;
	size_t t0 = m + 1, t = t0;
	size_t args = 0;
	bool query = false;
	while (t < n && buf[t] != ' ' && buf[t] != '\r' && buf[t] != '\n') {
		unsigned char c = (unsigned char)buf[t];
		if (c <= 0x20 || c == 0x7f)
			return verdict(o, GATE_BAD, "a control character in the request target");
		if (c == '?')
			query = true;
		if (query && (c == '&' || c == ';') && ++args > GATE_MAX_ARGS)
			return verdict(o, GATE_URI_LONG, "the query has too many arguments");
		if (t - t0 >= GATE_MAX_URI)
			return verdict(o, GATE_URI_LONG, "the request target is too long");
		t++;
	}
	if (t >= n)
		goto more;
	if (t == t0 || buf[t] != ' ')
		return verdict(o, GATE_BAD, "the request line is not METHOD TARGET HTTP/1.1");
	if (buf[t0] != '/' && buf[t0] != '*' && !(t - t0 > 7 && !memcmp(buf + t0, "http://", 7)) &&
	    !(t - t0 > 8 && !memcmp(buf + t0, "https://", 8)))
		return verdict(o, GATE_BAD, "the request target is not a path");
	bool bad = false;
	long le = line_end(buf, t + 1, n, &bad);
	if (bad)
		return verdict(o, GATE_BAD, "a stray CR or NUL in the request line");
	if (le < 0) {
		if (n - (t + 1) > 16)
			return verdict(o, GATE_BAD, "the request line does not end in HTTP/1.1");
		goto more;
	}
	size_t v = t + 1, ve = (size_t)le;
	if (ve > v && buf[ve - 1] == '\r')
		ve--;
	if (ve - v != 8 || memcmp(buf + v, "HTTP/", 5) || buf[v + 6] != '.' ||
	    buf[v + 5] < '0' || buf[v + 5] > '9' || buf[v + 7] < '0' || buf[v + 7] > '9')
		return verdict(o, GATE_BAD, "the request line does not end in HTTP/1.1");
	if (buf[v + 5] != '1')
		return verdict(o, GATE_VERSION, "only HTTP/1.0 and HTTP/1.1 are served");
	size_t tlen = t - t0;
	const char *tgt = buf + t0;
	/* header fields up to the empty line */
	size_t q = (size_t)le + 1, fields = 0;
	for (;;) {
		if (q >= n)
			goto more;
		le = line_end(buf, q, n, &bad);
		if (bad)
			return verdict(o, GATE_BAD, "a stray CR or NUL in a header field");
		if (le < 0) {
			if (n - q > GATE_MAX_LINE)
				return verdict(o, GATE_HEAD_LARGE, "a header field line is too long");
			goto more;
		}
		size_t e = (size_t)le, len = e - q;
		if (len > GATE_MAX_LINE)
			return verdict(o, GATE_HEAD_LARGE, "a header field line is too long");
		if (len && buf[e - 1] == '\r')
			len--;
		if (!len) {
			o->head_len = e + 1;
			break;
		}
		if (++fields > GATE_MAX_FIELDS)
			return verdict(o, GATE_HEAD_LARGE, "too many header fields");
		if (buf[q] == ' ' || buf[q] == '\t')
			return verdict(o, GATE_BAD, "obsolete line folding in a header field");
		size_t c = q;
		while (c < q + len && tchar((unsigned char)buf[c]))
			c++;
		if (c == q || c >= q + len || buf[c] != ':')
			return verdict(o, GATE_BAD, "a header field is not NAME: VALUE");
		q = e + 1;
		if (q > GATE_MAX_HEAD)
			return verdict(o, GATE_HEAD_LARGE, "the request head is too large");
	}
	if (o->head_len > GATE_MAX_HEAD)
		return verdict(o, GATE_HEAD_LARGE, "the request head is too large");
	o->health = path_is(tgt, tlen, "/health");
	o->metrics = path_is(tgt, tlen, "/metrics");
	return verdict(o, GATE_OK, NULL);
more:
	if (n > GATE_MAX_HEAD)
		return verdict(o, GATE_HEAD_LARGE, "the request head is too large");
	if (eof)
		return verdict(o, GATE_BAD, "the connection ended inside the request head");
	return verdict(o, GATE_MORE, NULL);
}

int gate_status(int v, const char **reason)
{
	switch (v) {
	case GATE_BAD: *reason = "Bad Request"; return 400;
	case GATE_URI_LONG: *reason = "URI Too Long"; return 414;
	case GATE_HEAD_LARGE: *reason = "Request Header Fields Too Large"; return 431;
	case GATE_VERSION: *reason = "HTTP Version Not Supported"; return 505;
	default: *reason = ""; return 0;
	}
}
