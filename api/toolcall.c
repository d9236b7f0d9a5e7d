/* toolcall: see toolcall.h. */
#include "api/toolcall.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api/json_text.h"
#include "common/err.h"

enum {
	S_LEAD = 0,     /* blanks before the reply's first value */
	S_FENCE,        /* inside the ``` of a fence */
	S_FENCE_TAG,    /* the fence's language word ("json") */
	S_ARR_START,    /* after the calls' '[' */
	S_ARR_NEXT,     /* after a ',' between calls of the array */
	S_OBJ_START,    /* after a call's '{' or a ',' between its members: a key */
	S_KEY,          /* inside a member's key */
	S_COLON,        /* after the key */
	S_VAL,          /* after the ':' */
	S_NAME,         /* inside the "name" string */
	S_ARGS,         /* inside the "arguments" object */
	S_SKIP,         /* inside another member's object or array */
	S_SKIPSTR,      /* inside another member's string */
	S_SCALAR,       /* inside another member's number or literal */
	S_AFTER_VAL,    /* after a member's value: ',' or '}' */
	S_ARR_AFTER,    /* after a call of the array: ',' or ']' */
	S_SEQ_AFTER,    /* after a call not in an array: another '{' or the end */
	S_DONE,         /* the calls are over (or broke): the rest is dropped */
};

void tc_init(struct tc_parser *p, char *const *names, uint32_t n_names, bool parallel)
{
	memset(p, 0, sizeof *p);
	p->names = names;
	p->n_names = n_names;
	p->parallel = parallel;
}

void tc_free(struct tc_parser *p)
{
	free(p->text);
	p->text = NULL;
	p->n = p->cap = 0;
}

static bool blank(char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* The reply cannot be (more) calls: before the first call's name it is
 * content; after it, the calls broke. */
static void fail(struct tc_parser *p)
{
	if (p->mode == TC_UNDECIDED)
		p->mode = TC_TEXT;
	else
		p->broken = true;
	p->st = S_DONE;
}

static void begin_call(struct tc_parser *p)
{
	if (p->n_calls == TC_MAX_CALLS) {
		p->st = S_DONE;
		return;
	}
	struct tc_call *c = &p->call[p->n_calls++];
	memset(c, 0, sizeof *c);
	c->name = -1;
	unsigned char r[12];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		for (size_t i = 0; i < sizeof r; i++)
			r[i] = (unsigned char)(rand() ^ (int)(p->n_calls * 31 + i));
	memcpy(c->id, "call_", 5);
	for (size_t i = 0; i < sizeof r; i++)
		snprintf(c->id + 5 + 2 * i, 3, "%02x", r[i]);
	p->st = S_OBJ_START;
}

static int report(struct tc_parser *p, tc_emit_fn emit, void *arg, struct tc_ev ev)
{
	(void)p;
	return emit ? emit(arg, &ev) : 0;
}

/* A started call's argument bytes not reported yet. */
static int flush_args(struct tc_parser *p, struct tc_call *c, tc_emit_fn emit, void *arg)
{
	if (!c->started || !c->has_args || c->a1 - c->a0 <= c->sent)
		return 0;
	size_t from = c->a0 + c->sent;
	c->sent = c->a1 - c->a0;
	return report(p, emit, arg,
		      (struct tc_ev){ TC_EV_ARGS, (uint32_t)(c - p->call), c->id, p->names[c->name], p->text + from,
				      c->a1 - from });
}

/* The call's name is known: the reply is calls; the call starts. */
static int start_call(struct tc_parser *p, struct tc_call *c, tc_emit_fn emit, void *arg)
{
	p->mode = TC_CALLS;
	c->started = true;
	int rc = report(p, emit, arg,
			(struct tc_ev){ TC_EV_CALL, (uint32_t)(c - p->call), c->id, p->names[c->name], NULL, 0 });
	return rc ? rc : flush_args(p, c, emit, arg);
}

/* The name string text[k0, at] (quotes included): one of the functions? */
static int32_t name_of(const struct tc_parser *p)
{
	json_t *s = json_loadb(p->text + p->k0, p->at + 1 - p->k0, JSON_DECODE_ANY, NULL);
	const char *v = json_string_value(s);
	int32_t found = -1;
	for (uint32_t i = 0; v && i < p->n_names && found < 0; i++)
		if (!strcmp(p->names[i], v))
			found = (int32_t)i;
	json_decref(s);
	return found;
}

/* A call's '}': it has a name and its arguments are a JSON object. */
static int end_call(struct tc_parser *p, struct tc_call *c, tc_emit_fn emit, void *arg)
{
	if (c->name < 0 || (c->has_args && !c->args_done)) {
		fail(p);
		return 0;
	}
	if (c->has_args) {
		json_t *a = json_loadb(p->text + c->a0, c->a1 - c->a0, 0, NULL);
		bool ok = json_is_object(a);
		json_decref(a);
		if (!ok) {
			fail(p);
			return 0;
		}
	}
	int rc = flush_args(p, c, emit, arg);
	if (!rc && !c->has_args) {
		/* no arguments written: {} */
		rc = report(p, emit, arg, (struct tc_ev){ TC_EV_ARGS, (uint32_t)(c - p->call), c->id, p->names[c->name],
							  "{}", 2 });
	}
	p->n_done++;
	p->st = !p->parallel ? S_DONE : p->array ? S_ARR_AFTER : S_SEQ_AFTER;
	return rc;
}

static int key_kind(const char *k, size_t n)
{
	if (n == 4 && !memcmp(k, "name", 4))
		return 1;
	if ((n == 9 && !memcmp(k, "arguments", 9)) || (n == 10 && !memcmp(k, "parameters", 10)))
		return 2;
	return 0;
}

/* One byte of the reply at p->at. */
static int step(struct tc_parser *p, tc_emit_fn emit, void *arg)
{
	char c = p->text[p->at];
	struct tc_call *cur = p->n_calls ? &p->call[p->n_calls - 1] : NULL;
	switch (p->st) {
	case S_LEAD:
		if (blank(c))
			return 0;
		if (c == '`' && !p->fenced) {
			p->st = S_FENCE;
			p->fence = 1;
		} else if (c == '{') {
			begin_call(p);
		} else if (c == '[') {
			p->array = true;
			p->st = S_ARR_START;
		} else {
			fail(p);
		}
		return 0;
	case S_FENCE:
		if (c != '`')
			fail(p);
		else if (++p->fence == 3) {
			p->fenced = true;
			p->st = S_FENCE_TAG;
			p->k0 = p->at + 1;
		}
		return 0;
	case S_FENCE_TAG:
		if (c == '\n')
			p->st = S_LEAD;
		else if (c == '{')
			begin_call(p);
		else if (c == '[') {
			p->array = true;
			p->st = S_ARR_START;
		} else if (!isalnum((unsigned char)c) || p->at - p->k0 >= 16)
			fail(p);
		return 0;
	case S_ARR_START:
	case S_ARR_NEXT:
		if (blank(c))
			return 0;
		if (c == '{')
			begin_call(p);
		else
			fail(p);
		return 0;
	case S_OBJ_START:
		if (blank(c))
			return 0;
		if (c == '"') {
			p->st = S_KEY;
			p->k0 = p->at + 1;
			p->esc = false;
		} else {
			fail(p);
		}
		return 0;
	case S_KEY:
		if (p->esc)
			p->esc = false;
		else if (c == '\\')
			p->esc = true;
		else if (c == '"') {
			p->key = key_kind(p->text + p->k0, p->at - p->k0);
			p->st = S_COLON;
		} else if (p->at - p->k0 >= TC_MAX_KEY)
			fail(p);
		return 0;
	case S_COLON:
		if (blank(c))
			return 0;
		if (c == ':')
			p->st = S_VAL;
		else
			fail(p);
		return 0;
	case S_VAL:
		if (blank(c))
			return 0;
		if (p->key == 1) {
			if (c != '"' || cur->name >= 0) {
				fail(p);
				return 0;
			}
			p->st = S_NAME;
			p->k0 = p->at;
			p->esc = false;
		} else if (p->key == 2) {
			if (c != '{' || cur->has_args) {
				fail(p);
				return 0;
			}
			cur->has_args = true;
			cur->a0 = p->at;
			cur->a1 = p->at + 1;
			p->depth = 1;
			p->in_str = p->esc = false;
			p->st = S_ARGS;
		} else if (c == '{' || c == '[') {
			p->depth = 1;
			p->in_str = p->esc = false;
			p->st = S_SKIP;
		} else if (c == '"') {
			p->esc = false;
			p->st = S_SKIPSTR;
		} else if (c == ',' || c == '}' || c == ']' || c == ':') {
			fail(p);
		} else {
			p->st = S_SCALAR;
		}
		return 0;
	case S_NAME:
		if (p->esc) {
			p->esc = false;
		} else if (c == '\\') {
			p->esc = true;
		} else if (c == '"') {
			cur->name = name_of(p);
			if (cur->name < 0) {
				fail(p);
				return 0;
			}
			p->st = S_AFTER_VAL;
			return start_call(p, cur, emit, arg);
		} else if (p->at - p->k0 > TC_MAX_KEY) {
			fail(p);
		}
		return 0;
	case S_ARGS:
	case S_SKIP:
		if (p->st == S_ARGS)
			cur->a1 = p->at + 1;
		if (p->in_str) {
			if (p->esc)
				p->esc = false;
			else if (c == '\\')
				p->esc = true;
			else if (c == '"')
				p->in_str = false;
		} else if (c == '"') {
			p->in_str = true;
		} else if (c == '{' || c == '[') {
			p->depth++;
		} else if ((c == '}' || c == ']') && --p->depth == 0) {
			if (p->st == S_ARGS)
				cur->args_done = true;
			p->st = S_AFTER_VAL;
		}
		return 0;
	case S_SKIPSTR:
		if (p->esc)
			p->esc = false;
		else if (c == '\\')
			p->esc = true;
		else if (c == '"')
			p->st = S_AFTER_VAL;
		return 0;
	case S_SCALAR:
		if (blank(c) || c == ',' || c == '}') {
			p->st = S_AFTER_VAL;
			return step(p, emit, arg);
		}
		return 0;
	case S_AFTER_VAL:
		if (blank(c))
			return 0;
		if (c == ',')
			p->st = S_OBJ_START;
		else if (c == '}')
			return end_call(p, cur, emit, arg);
		else
			fail(p);
		return 0;
	case S_ARR_AFTER:
		if (blank(c))
			return 0;
		p->st = c == ',' ? S_ARR_NEXT : S_DONE;
		return 0;
	case S_SEQ_AFTER:
		if (blank(c))
			return 0;
		if (c == '{')
			begin_call(p);
		else
			p->st = S_DONE;
		return 0;
	default:
		return 0;
	}
}

static int flush_text(struct tc_parser *p, tc_emit_fn emit, void *arg)
{
	if (p->mode != TC_TEXT || p->text_sent == p->n)
		return 0;
	size_t from = p->text_sent;
	p->text_sent = p->n;
	return report(p, emit, arg, (struct tc_ev){ TC_EV_TEXT, 0, NULL, NULL, p->text + from, p->n - from });
}

int tc_feed(struct tc_parser *p, const char *b, size_t len, tc_emit_fn emit, void *arg)
{
	if (len) {
		if (p->n + len + 1 > p->cap) {
			size_t cap = (p->n + len + 1) * 2;
			char *t = realloc(p->text, cap);
			if (!t)
				return err_set(ERR_NOMEM, "toolcall: out of memory");
			p->text = t;
			p->cap = cap;
		}
		memcpy(p->text + p->n, b, len);
		p->n += len;
		p->text[p->n] = 0;
	}
	int rc = 0;
	for (; !rc && p->at < p->n && p->st != S_DONE && p->mode != TC_TEXT; p->at++)
		rc = step(p, emit, arg);
	if (!rc)
		rc = flush_text(p, emit, arg);
	if (!rc && p->mode == TC_CALLS && p->n_calls && !p->broken)
		rc = flush_args(p, &p->call[p->n_calls - 1], emit, arg);
	return rc;
}

bool tc_end(struct tc_parser *p, tc_emit_fn emit, void *arg, int *rc)
{
	if (p->mode == TC_UNDECIDED)
		p->mode = TC_TEXT;
	int r = flush_text(p, emit, arg);
	if (rc)
		*rc = r;
	return p->mode == TC_CALLS && !p->broken && p->n_done && p->n_done == p->n_calls;
}

char *tc_calls_json(const struct tc_parser *p)
{
	if (!(p->mode == TC_CALLS && !p->broken && p->n_done && p->n_done == p->n_calls))
		return NULL;
	json_t *arr = json_array();
	for (uint32_t i = 0; arr && i < p->n_done; i++) {
		const struct tc_call *c = &p->call[i];
		json_t *a = c->has_args ? json_stringn(p->text + c->a0, c->a1 - c->a0) : json_string("{}");
		json_t *call = a ? json_pack("{s:s, s:s, s:{s:s, s:o}}", "id", c->id, "type", "function", "function", "name",
					     p->names[c->name], "arguments", a)
				 : NULL;
		if (!call || json_array_append_new(arr, call)) {
			json_decref(arr);
			arr = NULL;
		}
	}
	char *s = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
	json_decref(arr);
	return s;
}


char *tc_delta_json(const struct tc_ev *ev)
{
	json_t *d;
	if (ev->kind == TC_EV_CALL)
		d = json_pack("[{s:i, s:s, s:s, s:{s:s, s:s}}]", "index", (int)ev->index, "id", ev->id, "type", "function",
			      "function", "name", ev->name, "arguments", "");
	else if (ev->kind == TC_EV_ARGS)
		d = json_pack("[{s:i, s:{s:o*}}]", "index", (int)ev->index, "function", "arguments", json_text(ev->s, ev->len));
	else
		return NULL;
	char *s = d ? json_dumps(d, JSON_COMPACT) : NULL;
	json_decref(d);
	return s;
}
