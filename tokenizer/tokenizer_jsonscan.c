/* tokenizer_jsonscan: read a tokenizer.json quickly.
 *
 * A Gemma 3 tokenizer.json is 33 MB, almost all of it model.vocab (262144 entries) and
 * model.merges (514906 pairs). Building a jansson tree of that takes most of a second, so
 * this scanner parses those two directly into flat arrays (strings without escapes point
 * into the file buffer) and hands every other value, as its raw span, to jansson. */
#include "tokenizer/tokenizer_int.h"
#include "tokenizer/tokenizer_jsonscan.h"
#include "common/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 512
#define MAX_FILE (1ull << 31) /* 2 GiB: far above any real tokenizer.json */

struct scan {
	const char *path;
	const char *base, *p, *end;
	char *scratch; /* decoded strings with escapes; never longer than the file */
	size_t scratch_n;
};

static int line_of(const struct scan *s, const char *at)
{
	int line = 1;
	for (const char *q = s->base; q < at && q < s->end; q++)
		line += *q == '\n';
	return line;
}

static int fail(const struct scan *s, const char *what)
{
	return err_set(ERR_INVAL, "%s: line %d: %s", s->path, line_of(s, s->p), what);
}

static void ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
		s->p++;
}

static int expect(struct scan *s, char c)
{
	ws(s);
	if (s->p >= s->end || *s->p != c) {
		char m[32];
		snprintf(m, sizeof m, "expected '%c'", c);
		return fail(s, m);
	}
	s->p++;
	return 0;
}

static int hex4(const char *p, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		*v = *v << 4 | (uint32_t)d;
	}
	return 0;
}

static size_t put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* A JSON string at s->p (after whitespace): *out points into the file when it has no
 * escapes, else into scratch. */
static int string(struct scan *s, struct tok_jstr *out)
{
	ws(s);
	if (s->p >= s->end || *s->p != '"')
		return fail(s, "expected a string");
	const char *q = ++s->p;
	while (q < s->end && *q != '"' && *q != '\\' && (uint8_t)*q >= 0x20)
		q++;
	if (q < s->end && *q == '"') {
		if ((size_t)(q - s->p) > UINT32_MAX)
			return fail(s, "string too long");
		out->p = s->p;
		out->len = (uint32_t)(q - s->p);
		s->p = q + 1;
		return 0;
	}
	/* escapes: decode (the output is never longer than the input) */
	char *o = s->scratch + s->scratch_n, *o0 = o;
	q = s->p;
	for (;;) {
		if (q >= s->end) {
			s->p = q;
			return fail(s, "unterminated string");
		}
		uint8_t c = (uint8_t)*q;
		if (c == '"')
			break;
		if (c < 0x20) {
			s->p = q;
			return fail(s, "control character in string");
		}
		if (c != '\\') {
			*o++ = (char)c;
			q++;
			continue;
		}
		if (q + 1 >= s->end) {
			s->p = q;
			return fail(s, "unterminated string");
		}
		char e = q[1];
		q += 2;
		switch (e) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			uint32_t cp, lo;
			if (s->end - q < 4 || hex4(q, &cp)) {
				s->p = q;
				return fail(s, "bad \\u escape");
			}
			q += 4;
			if (cp >= 0xD800 && cp < 0xDC00) {
				if (s->end - q < 6 || q[0] != '\\' || q[1] != 'u' || hex4(q + 2, &lo) ||
				    lo < 0xDC00 || lo > 0xDFFF) {
					s->p = q;
					return fail(s, "unpaired surrogate in \\u escape");
				}
				q += 6;
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			} else if (cp >= 0xDC00 && cp < 0xE000) {
				s->p = q;
				return fail(s, "unpaired surrogate in \\u escape");
			}
			o += put_utf8(o, cp);
			break;
		}
		default:
			s->p = q;
			return fail(s, "bad escape in string");
		}
	}
	out->p = o0;
	out->len = (uint32_t)(o - o0);
	s->scratch_n += (size_t)(o - o0);
	s->p = q + 1;
	return 0;
}

static int skip_value(struct scan *s, int depth)
{
	if (depth > MAX_DEPTH)
		return fail(s, "nesting too deep");
	ws(s);
	if (s->p >= s->end)
		return fail(s, "unexpected end of file");
	char c = *s->p;
	struct tok_jstr str;
	if (c == '"')
		return string(s, &str);
	if (c == '{' || c == '[') {
		char close = c == '{' ? '}' : ']';
		s->p++;
		ws(s);
		if (s->p < s->end && *s->p == close) {
			s->p++;
			return 0;
		}
		for (;;) {
			int rc;
			if (c == '{' && ((rc = string(s, &str)) || (rc = expect(s, ':'))))
				return rc;
			if ((rc = skip_value(s, depth + 1)))
				return rc;
			ws(s);
			if (s->p < s->end && *s->p == ',') {
				s->p++;
				continue;
			}
			return expect(s, close);
		}
	}
	/* number or literal: its characters; jansson validates the span later if it matters */
	const char *q = s->p;
	while (q < s->end && (strchr("+-.eE", *q) || (*q >= '0' && *q <= '9') ||
			      (*q >= 'a' && *q <= 'z')))
		q++;
	if (q == s->p)
		return fail(s, "unexpected character");
	s->p = q;
	return 0;
}

/* The value at s->p parsed by jansson (it validates it completely). */
static int span_to_json(struct scan *s, json_t **out)
{
	ws(s);
	const char *start = s->p;
	int rc = skip_value(s, 0);
	if (rc)
		return rc;
	json_error_t e;
	*out = json_loadb(start, (size_t)(s->p - start), JSON_ALLOW_NUL | JSON_DECODE_ANY, &e);
	if (!*out)
		return err_set(ERR_INVAL, "%s: line %d: %s", s->path, line_of(s, start) + e.line - 1,
			       e.text);
	return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 1024;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * elem);
	if (!q)
		return ERR_NOMEM;
	*p = q;
	*cap = c;
	return 0;
}

static int integer(struct scan *s, int64_t *v)
{
	ws(s);
	const char *q = s->p;
	bool neg = q < s->end && *q == '-';
	q += neg;
	int64_t x = 0;
	const char *d0 = q;
	while (q < s->end && *q >= '0' && *q <= '9' && q - d0 < 18)
		x = x * 10 + (*q++ - '0');
	if (q == d0 || (q < s->end && (strchr(".eE", *q) || (*q >= '0' && *q <= '9'))))
		return -1;
	s->p = q;
	*v = neg ? -x : x;
	return 0;
}

static int vocab(struct scan *s, struct tok_jfile *f)
{
	size_t cap = 0;
	s->p++; /* '{' */
	ws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		return 0;
	}
	for (;;) {
		struct tok_jstr k;
		int64_t id;
		int rc = string(s, &k);
		if (rc || (rc = expect(s, ':')))
			return rc;
		if (integer(s, &id) || id < 0 || id >= (int64_t)TOK_MAX_VOCAB)
			return err_set(ERR_RANGE, "%s: model.vocab[\"%.*s\"]: id missing or out of range",
				       s->path, (int)(k.len > 64 ? 64 : k.len), k.p);
		if (f->n_vocab == cap) {
			size_t c = cap ? cap * 2 : 1024;
			void *a = realloc(f->vocab_key, c * sizeof *f->vocab_key);
			if (a)
				f->vocab_key = a;
			void *b = a ? realloc(f->vocab_id, c * sizeof *f->vocab_id) : NULL;
			if (!b)
				return err_set(ERR_NOMEM, "%s: out of memory", s->path);
			f->vocab_id = b;
			cap = c;
		}
		f->vocab_key[f->n_vocab] = k;
		f->vocab_id[f->n_vocab++] = (uint32_t)id;
		ws(s);
		if (s->p < s->end && *s->p == ',') {
			s->p++;
			continue;
		}
		return expect(s, '}');
	}
}

static int merges(struct scan *s, struct tok_jfile *f)
{
	size_t cap = 0;
	s->p++; /* '[' */
	ws(s);
	if (s->p < s->end && *s->p == ']') {
		s->p++;
		return 0;
	}
	for (;;) {
		struct tok_jstr a, b;
		int rc;
		ws(s);
		if (s->p < s->end && *s->p == '[') { /* ["a", "b"] */
			s->p++;
			if ((rc = string(s, &a)) || (rc = expect(s, ',')) || (rc = string(s, &b)) ||
			    (rc = expect(s, ']')))
				return err_prefix(rc, "%s: model.merges[%zu]", s->path, f->n_merges);
		} else if (s->p < s->end && *s->p == '"') { /* "a b" */
			if ((rc = string(s, &a)))
				return rc;
			const char *sp = memchr(a.p, ' ', a.len);
			if (!sp || memchr(sp + 1, ' ', a.len - (size_t)(sp + 1 - a.p)))
				return err_set(ERR_INVAL, "%s: model.merges[%zu]: not \"a b\"", s->path,
					       f->n_merges);
			b.p = sp + 1;
			b.len = a.len - (uint32_t)(sp - a.p) - 1;
			a.len = (uint32_t)(sp - a.p);
		} else {
			return err_set(ERR_INVAL, "%s: model.merges[%zu]: not a string or [a, b]",
				       s->path, f->n_merges);
		}
		void *m = f->merges;
		if (grow(&m, &cap, f->n_merges + 1, sizeof *f->merges))
			return err_set(ERR_NOMEM, "%s: out of memory", s->path);
		f->merges = m;
		f->merges[f->n_merges][0] = a;
		f->merges[f->n_merges++][1] = b;
		ws(s);
		if (s->p < s->end && *s->p == ',') {
			s->p++;
			continue;
		}
		return expect(s, ']');
	}
}

static bool key_is(const struct tok_jstr *k, const char *s)
{
	return k->len == strlen(s) && memcmp(k->p, s, k->len) == 0;
}

/* An object whose members go into a jansson object, except those taken by special(). */
static int object(struct scan *s, struct tok_jfile *f, json_t *obj, bool is_model)
{
	int rc = expect(s, '{');
	if (rc)
		return rc;
	ws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		return 0;
	}
	for (;;) {
		struct tok_jstr k;
		if ((rc = string(s, &k)) || (rc = expect(s, ':')))
			return rc;
		ws(s);
		char c = s->p < s->end ? *s->p : 0;
		json_t *v = NULL;
		if (is_model && key_is(&k, "vocab") && c == '{') {
			f->has_vocab = true;
			rc = vocab(s, f);
		} else if (is_model && key_is(&k, "merges") && c == '[') {
			f->has_merges = true;
			rc = merges(s, f);
		} else if (!is_model && key_is(&k, "model") && c == '{') {
			v = json_object();
			rc = v ? object(s, f, v, true) : err_set(ERR_NOMEM, "%s: out of memory", s->path);
		} else {
			rc = span_to_json(s, &v);
		}
		if (v && !rc) {
			char *key = strndup(k.p, k.len);
			if (!key || json_object_setn_new(obj, key, k.len, v)) {
				free(key);
				return err_set(ERR_NOMEM, "%s: out of memory", s->path);
			}
			free(key);
			v = NULL;
		}
		json_decref(v);
		if (rc)
			return rc;
		ws(s);
		if (s->p < s->end && *s->p == ',') {
			s->p++;
			continue;
		}
		return expect(s, '}');
	}
}

int tok_jfile_read(const char *path, struct tok_jfile *f)
{
	memset(f, 0, sizeof *f);
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
	int rc = 0;
	long n = -1;
	if (fseek(fp, 0, SEEK_END) == 0)
		n = ftell(fp);
	if (n < 0 || fseek(fp, 0, SEEK_SET) != 0)
		rc = err_set(ERR_IO, "%s: cannot size the file", path);
	else if ((unsigned long long)n > MAX_FILE)
		rc = err_set(ERR_RANGE, "%s: %ld bytes is too large for a tokenizer.json", path, n);
	else if (!(f->buf = malloc((size_t)n + 1)) || !(f->scratch = malloc((size_t)n + 1)))
		rc = err_set(ERR_NOMEM, "%s: out of memory", path);
	else if (fread(f->buf, 1, (size_t)n, fp) != (size_t)n)
		rc = err_set(ERR_IO, "%s: read failed", path);
	fclose(fp);
	if (rc) {
		tok_jfile_free(f);
		return rc;
	}
	f->len = (size_t)n;
	struct scan s = {path, f->buf, f->buf, f->buf + n, f->scratch, 0};
	f->root = json_object();
	if (!f->root)
		rc = err_set(ERR_NOMEM, "%s: out of memory", path);
	else if (!(rc = object(&s, f, f->root, false))) {
		ws(&s);
		if (s.p != s.end)
			rc = fail(&s, "text after the top-level object");
	}
	if (rc)
		tok_jfile_free(f);
	return rc;
}

void tok_jfile_free(struct tok_jfile *f)
{
	json_decref(f->root);
	free(f->buf);
	free(f->scratch);
	free(f->vocab_key);
	free(f->vocab_id);
	free(f->merges);
	memset(f, 0, sizeof *f);
}
