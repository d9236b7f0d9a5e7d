/* chat: Gemma 3 chat template rendering and encoding. */
#include "chat/template.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

struct sbuf {
	char *p;
	size_t n, cap;
};

static int sb_add(struct sbuf *b, const char *s, size_t len)
{
	if (len > SIZE_MAX / 2 - b->n - 1)
		return err_set(ERR_RANGE, "chat: text too long");
	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + len + 1)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			return err_set(ERR_NOMEM, "chat: out of memory");
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = 0;
	return 0;
}

static int sb_str(struct sbuf *b, const char *s)
{
	return sb_add(b, s, strlen(s));
}

static int is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Jinja's |trim: strip surrounding whitespace. */
static int sb_trimmed(struct sbuf *b, const char *s)
{
	size_t a = 0, e = strlen(s);
	while (a < e && is_ws(s[a]))
		a++;
	while (e > a && is_ws(s[e - 1]))
		e--;
	return sb_add(b, s + a, e - a);
}

int chat_render(const struct chat_msg *msgs, size_t n, bool add_gen, char **out, size_t *len)
{
	if (!out || (n && !msgs))
		return err_set(ERR_INVAL, "chat: NULL argument");
	*out = NULL;
	struct sbuf b = { 0 };
	int rc = sb_str(&b, "<bos>");
	size_t i = 0;
	const char *system = NULL;
	if (n && msgs[0].role && !strcmp(msgs[0].role, "system")) {
		system = msgs[0].content ? msgs[0].content : "";
		i = 1;
	}
	bool want_user = true;
	for (; !rc && i < n; i++) {
		const char *role = msgs[i].role, *content = msgs[i].content;
		if (!role || !content) {
			rc = err_set(ERR_INVAL, "chat: message %zu: missing role or content", i);
			break;
		}
		bool user = !strcmp(role, "user");
		bool model = !strcmp(role, "model") || !strcmp(role, "assistant");
		if (!user && !model) {
			rc = err_set(ERR_INVAL, "chat: message %zu: role '%s' (system only first)", i,
				     role);
			break;
		}
		if (user != want_user) {
			rc = err_set(ERR_INVAL, "chat: message %zu: roles must alternate user/model "
				     "starting with user", i);
			break;
		}
		want_user = !want_user;
		rc = sb_str(&b, user ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
		if (!rc && user && system) {
			rc = sb_trimmed(&b, system);
			if (!rc)
				rc = sb_str(&b, "\n\n");
			system = NULL;
		}
		if (!rc)
			rc = sb_trimmed(&b, content);
		if (!rc)
			rc = sb_str(&b, "<end_of_turn>\n");
	}
	if (!rc && system) /* a system message alone still opens a user turn */
		rc = err_set(ERR_INVAL, "chat: a system message needs a user message after it");
	if (!rc && add_gen)
		rc = sb_str(&b, "<start_of_turn>model\n");
	if (rc) {
		free(b.p);
		return rc;
	}
	*out = b.p;
	if (len)
		*len = b.n;
	return 0;
}

/* Drop a second BOS right after the first (template <bos> + add_bos). */
static void drop_double_bos(const struct tok *t, struct tok_ids *ids, size_t start)
{
	int32_t bos = tok_bos(t);
	if (bos < 0 || ids->n < start + 2 || ids->ids[start] != bos || ids->ids[start + 1] != bos)
		return;
	memmove(ids->ids + start + 1, ids->ids + start + 2,
		(ids->n - start - 2) * sizeof ids->ids[0]);
	ids->n--;
}

int chat_encode(const struct tok *t, const struct chat_msg *msgs, size_t n, bool add_gen,
		struct tok_ids *out)
{
	if (!t || !out)
		return err_set(ERR_INVAL, "chat: NULL argument");
	char *text;
	size_t len;
	int rc = chat_render(msgs, n, add_gen, &text, &len);
	if (rc)
		return rc;
	/* The template's "<bos>" text is the one BOS (the tokenizer splits it out
	 * as a special token), so add_bos stays off here whatever the tokenizer's
	 * default: that is how a double BOS is avoided. */
	size_t start = out->n;
	rc = tok_encode(t, text, len, false, out);
	free(text);
	if (!rc)
		drop_double_bos(t, out, start);
	return rc;
}

/* Append text[0..len) + tail (tail first when lead) tokenized, no BOS added. */
static int enc_join(const struct tok *t, const char *head, const char *text, size_t len, const char *tail,
		    struct tok_ids *out)
{
	size_t hn = strlen(head), tn = strlen(tail);
	char *buf = malloc(hn + len + tn + 1);
	if (!buf)
		return err_set(ERR_NOMEM, "chat: out of memory");
	memcpy(buf, head, hn);
	memcpy(buf + hn, text, len);
	memcpy(buf + hn + len, tail, tn);
	int rc = tok_encode(t, buf, hn + len + tn, false, out);
	free(buf);
	return rc;
}

int chat_encode_images(const struct tok *t, const struct chat_msg *msgs, size_t n, bool add_gen,
		       const uint32_t *row_ids, uint32_t n_images, uint32_t rows, struct tok_ids *out)
{
	if (!t || !out || (n_images && (!row_ids || !rows)))
		return err_set(ERR_INVAL, "chat: NULL argument");
	char *text;
	size_t len;
	int rc = chat_render(msgs, n, add_gen, &text, &len);
	if (rc)
		return rc;
	size_t start = out->n, ml = strlen(CHAT_IMAGE_MARK);
	const char *p = text, *end = text + len;
	uint32_t k = 0;
	for (;;) {
		const char *m = memmem(p, (size_t)(end - p), CHAT_IMAGE_MARK, ml);
		if (!m || k >= n_images) {
			if (m || k != n_images) {
				free(text);
				return err_set(ERR_INVAL, "chat: %u image(s) but %s image marks in the text (U+FFFC is "
					       "reserved for images)", n_images, m ? "more" : "fewer");
			}
			rc = enc_join(t, k ? "<end_of_image>\n\n" : "", p, (size_t)(end - p), "", out);
			break;
		}
		rc = enc_join(t, k ? "<end_of_image>\n\n" : "", p, (size_t)(m - p), "\n\n<start_of_image>", out);
		if (!rc && out->n + rows > out->cap) {
			size_t cap = out->cap ? out->cap : 64;
			while (cap < out->n + rows)
				cap *= 2;
			int32_t *q = realloc(out->ids, cap * sizeof *q);
			if (!q)
				rc = err_set(ERR_NOMEM, "chat: out of memory");
			else
				out->ids = q, out->cap = cap;
		}
		if (rc)
			break;
		for (uint32_t j = 0; j < rows; j++) {
			uint32_t id = row_ids[(size_t)k * rows + j];
			int32_t v;
			memcpy(&v, &id, sizeof v);
			out->ids[out->n++] = v;
		}
		p = m + ml;
		k++;
	}
	free(text);
	if (!rc)
		drop_double_bos(t, out, start);
	return rc;
}

int chat_encode_plain(const struct tok *t, const char *text, size_t len, struct tok_ids *out)
{
	size_t start = out->n;
	int rc = tok_encode(t, text, len, tok_add_bos(t), out);
	if (!rc)
		drop_double_bos(t, out, start);
	return rc;
}

bool chat_is_stop(const struct tok *t, int32_t id)
{
	if (id < 0)
		return false;
	if (id == tok_eos(t) || id == tok_eot(t))
		return true;
	return tok_is_eog(t, id);
}

static char *fmt_alloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_alloc(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

char *chat_tools_preamble(const char *functions_json, bool required, bool parallel)
{
	const char *how =
		required && parallel
			? "To call functions, answer with only a JSON array of one or more calls on one line, "
			  "[{\"name\": FUNCTION_NAME, \"arguments\": {ARGUMENTS}}, ...], and nothing else. "
			: "To call a function, answer with only a JSON object on one line, "
			  "{\"name\": FUNCTION_NAME, \"arguments\": {ARGUMENTS}}, and nothing else. ";
	return fmt_alloc("You can call functions. The functions you can call, one JSON object per line:\n%s\n%s%s%s",
			 functions_json, how,
			 parallel && !required ? "To call several functions at once, answer with a JSON array of such "
						 "objects. "
					       : "",
			 required ? "You must call a function now."
				  : "If no function is needed, answer the user directly in plain text.");
}

char *chat_tool_call(const char *name, const char *arguments_json)
{
	json_t *n = json_string(name ? name : "");
	char *ns = n ? json_dumps(n, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	json_decref(n);
	if (!ns)
		return NULL;
	char *s = fmt_alloc("{\"name\": %s, \"arguments\": %s}", ns,
			    arguments_json && *arguments_json ? arguments_json : "{}");
	free(ns);
	return s;
}

char *chat_tool_result(const char *name, const char *call_id, const char *content)
{
	return fmt_alloc("Result of %s (call %s): %s", name && *name ? name : "the function",
			 call_id && *call_id ? call_id : "-", content ? content : "");
}
