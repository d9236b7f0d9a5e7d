/* openai: request parsing/validation and response building (pure). */
#include "api/openai.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <sys/random.h>
#include <jansson.h>

#include "common/err.h"
#include "chat/template.h"
#include "api/json_text.h"
#include "api/toolcall.h"
#include "constrain/constrain.h"
#include "ipc/msg.h"

int oai_err_set(struct oai_err *e, int status, const char *type, const char *param,
		const char *code, const char *fmt, ...)
{
	memset(e, 0, sizeof *e);
	e->status = status;
	snprintf(e->type, sizeof e->type, "%s", type ? type : "invalid_request_error");
	snprintf(e->param, sizeof e->param, "%s", param ? param : "");
	snprintf(e->code, sizeof e->code, "%s", code ? code : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof e->message, fmt, ap);
	va_end(ap);
	return -1;
}

#define BAD(e, param, ...) oai_err_set(e, 400, "invalid_request_error", param, NULL, __VA_ARGS__)

char *oai_error_json(const struct oai_err *e)
{
	json_t *o = json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", e->message, "type",
			      e->type, "param", e->param[0] ? json_string(e->param) : json_null(),
			      "code", e->code[0] ? json_string(e->code) : json_null());
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

void oai_req_free(struct oai_req *r)
{
	for (uint32_t i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	for (uint32_t i = 0; i < r->n_msgs; i++) {
		free(r->msgs[i].role);
		free(r->msgs[i].content);
	}
	free(r->msgs);
	for (uint32_t i = 0; i < r->n_images; i++)
		free(r->image_urls[i]);
	free(r->prompt);
	free(r->schema);
	for (uint32_t i = 0; i < r->n_tools; i++)
		free(r->tool_names[i]);
	free(r->tool_names);
	free(r->bias_ids);
	free(r->bias);
	memset(r, 0, sizeof *r);
}

/* A present, non-null field. */
static json_t *field(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_null(v) ? NULL : v;
}

static int get_number(json_t *o, const char *k, double lo, double hi, double *out,
		      struct oai_err *e)
{
	json_t *v = field(o, k);
	if (!v)
		return 0;
	if (!json_is_number(v))
		return BAD(e, k, "'%s' must be a number", k);
	double d = json_number_value(v);
	if (!isfinite(d) || d < lo || d > hi)
		return BAD(e, k, "'%s' must be between %g and %g (got %g)", k, lo, hi, d);
	*out = d;
	return 0;
}

static int get_int(json_t *o, const char *k, long long lo, long long hi, long long *out,
		   struct oai_err *e)
{
	json_t *v = field(o, k);
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return BAD(e, k, "'%s' must be an integer", k);
	long long x = json_integer_value(v);
	if (x < lo || x > hi)
		return BAD(e, k, "'%s' must be between %lld and %lld (got %lld)", k, lo, hi, x);
	*out = x;
	return 0;
}

/* An image part's URL: {"type":"image_url","image_url":{"url":...}} (or
 * "image_url": "..."), kept in r->image_urls; NULL after a refusal. */
static const char *image_part(json_t *p, uint32_t i, size_t j, bool user, struct oai_req *r, struct oai_err *e)
{
	json_t *iu = json_object_get(p, "image_url");
	json_t *u = json_is_object(iu) ? json_object_get(iu, "url") : iu;
	if (!json_is_string(u) || strlen(json_string_value(u)) != json_string_length(u)) {
		BAD(e, "messages", "messages[%u].content[%zu]: an image part is {\"type\": \"image_url\", "
		    "\"image_url\": {\"url\": \"data:image/png;base64,...\"}}", i, j);
		return NULL;
	}
	if (!user) {
		BAD(e, "messages", "messages[%u].content[%zu]: images go in user messages", i, j);
		return NULL;
	}
	if (r->n_images >= OAI_MAX_IMAGES) {
		BAD(e, "messages", "more than %d images in one request", OAI_MAX_IMAGES);
		return NULL;
	}
	if (!(r->image_urls[r->n_images] = strdup(json_string_value(u)))) {
		oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
		return NULL;
	}
	r->n_images++;
	return CHAT_IMAGE_MARK;
}

/* Content: a string, or an array of {"type":"text","text":...} parts (joined)
 * and image parts (image_part: each leaves CHAT_IMAGE_MARK). */
static int content_text(json_t *c, uint32_t i, bool user, struct oai_req *r, char **out, struct oai_err *e)
{
	if (json_is_string(c)) {
		if (strlen(json_string_value(c)) != json_string_length(c))
			return BAD(e, "messages", "messages[%u].content contains a NUL character", i);
		*out = strndup(json_string_value(c), json_string_length(c));
	} else if (json_is_array(c)) {
		size_t n = 0, j;
		json_t *p;
		json_array_foreach(c, j, p) {
			json_t *t = json_object_get(p, "text");
			const char *ty = json_is_object(p) ? json_string_value(json_object_get(p, "type")) : NULL;
			if (ty && !strcmp(ty, "image_url")) {
				if (!image_part(p, i, j, user, r, e))
					return -1;
				n += strlen(CHAT_IMAGE_MARK);
				continue;
			}
			if (!json_is_object(p) || !json_is_string(json_object_get(p, "type")) ||
			    strcmp(json_string_value(json_object_get(p, "type")), "text") ||
			    !json_is_string(t))
				return BAD(e, "messages", "messages[%u].content[%zu]: only text parts "
					   "{\"type\": \"text\", \"text\": ...} are supported", i, j);
			n += json_string_length(t);
		}
		char *s = malloc(n + 1);
		if (!s)
			return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
		size_t k = 0;
		json_array_foreach(c, j, p) {
			json_t *t = json_object_get(p, "text");
			const char *ty = json_string_value(json_object_get(p, "type"));
			if (ty && !strcmp(ty, "image_url")) {
				memcpy(s + k, CHAT_IMAGE_MARK, strlen(CHAT_IMAGE_MARK));
				k += strlen(CHAT_IMAGE_MARK);
				continue;
			}
			memcpy(s + k, json_string_value(t), json_string_length(t));
			k += json_string_length(t);
		}
		s[k] = 0;
		*out = s;
	} else {
		return BAD(e, "messages", "messages[%u].content must be a string", i);
	}
	if (!*out)
		return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
	return 0;
}

static json_t *load(const char *body, size_t len, struct oai_err *e)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		BAD(e, NULL, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
		    je.column);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		BAD(e, NULL, "the body must be a JSON object");
		return NULL;
	}
	return root;
}

/* Parameters we do not implement: refused rather than silently ignored,
 * unless they carry their neutral value. */
static int unsupported(json_t *o, int kind, struct oai_err *e)
{
	(void)kind;
	json_t *v;
	if (field(o, "functions"))
		return BAD(e, "functions", "'functions' (the deprecated form) is not supported: use 'tools'");
	if (kind == OAI_COMPLETION && field(o, "tools"))
		return BAD(e, "tools", "'tools' is a chat completions field");
	v = field(o, "best_of");
	if (v && !(json_is_integer(v) && json_integer_value(v) == 1))
		return BAD(e, "best_of", "'best_of' must be 1");
	v = field(o, "echo");
	if (v && !json_is_false(v))
		return BAD(e, "echo", "'echo' is not supported");
	v = field(o, "suffix");
	if (v && !(json_is_string(v) && json_string_length(v) == 0))
		return BAD(e, "suffix", "'suffix' is not supported");
	return 0;
}

/* response_format: {"type": "text" | "json_object" | "json_schema",
 * "json_schema": {"name", "schema", "strict", "description"}}. The schema is
 * compiled here so an unsupported keyword or a hostile schema is a 400 that
 * names it before anything is queued. */
static int parse_response_format(json_t *o, struct oai_req *r, struct oai_err *e)
{
	json_t *v = field(o, "response_format");
	if (!v)
		return 0;
	const char *t = json_is_object(v) ? json_string_value(json_object_get(v, "type")) : NULL;
	if (!t)
		return BAD(e, "response_format", "'response_format' must be {\"type\": \"text\" | "
			   "\"json_object\" | \"json_schema\", ...}");
	if (!strcmp(t, "text"))
		return 0;
	if (!strcmp(t, "json_object")) {
		r->json = true;
		return 0;
	}
	if (strcmp(t, "json_schema"))
		return BAD(e, "response_format", "response_format type '%.40s' is not supported (text, "
			   "json_object, json_schema)", t);
	json_t *js = json_object_get(v, "json_schema");
	json_t *sc = json_is_object(js) ? json_object_get(js, "schema") : NULL;
	if (!json_is_object(js))
		return BAD(e, "response_format", "response_format json_schema needs a 'json_schema' object "
			   "{\"name\", \"schema\"}");
	json_t *strict = json_object_get(js, "strict");
	if (strict && !json_is_boolean(strict) && !json_is_null(strict))
		return BAD(e, "response_format", "json_schema.strict must be a boolean");
	if (!sc || json_is_null(sc)) {
		r->json = true; /* no schema: any object, as json_object */
		return 0;
	}
	if (!json_is_object(sc))
		return BAD(e, "response_format", "json_schema.schema must be an object");
	char *txt = json_dumps(sc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!txt)
		return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
	size_t n = strlen(txt);
	struct cs_schema *cs = NULL;
	int rc = n > OAI_MAX_SCHEMA ? err_set(ERR_RANGE, "schema: %zu bytes (at most %d)", n, OAI_MAX_SCHEMA)
				    : cs_schema_compile(txt, n, &cs);
	cs_schema_free(cs);
	if (rc) {
		free(txt);
		return BAD(e, "response_format", "json_schema.%s", err_msg());
	}
	r->json = true;
	r->schema = txt;
	r->n_schema = n;
	return 0;
}

/* logit_bias: {"token id": bias -100..100} (OpenAI: at most 300 entries). */
static int parse_logit_bias(json_t *o, struct oai_req *r, struct oai_err *e)
{
	json_t *v = field(o, "logit_bias");
	if (!v)
		return 0;
	if (!json_is_object(v))
		return BAD(e, "logit_bias", "'logit_bias' must be an object {\"token id\": bias}");
	size_t n = json_object_size(v);
	if (n == 0)
		return 0;
	if (n > OAI_MAX_BIAS)
		return BAD(e, "logit_bias", "'logit_bias' takes at most %d tokens (got %zu)", OAI_MAX_BIAS, n);
	r->bias_ids = calloc(n, sizeof *r->bias_ids);
	r->bias = calloc(n, sizeof *r->bias);
	if (!r->bias_ids || !r->bias)
		return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
	const char *k;
	json_t *b;
	json_object_foreach(v, k, b) {
		char *end = NULL;
		errno = 0;
		unsigned long id = strtoul(k, &end, 10);
		if (!*k || *end || errno || k[0] == '-' || k[0] == '+' || id >= (1ul << 31))
			return BAD(e, "logit_bias", "logit_bias key '%.40s' is not a token id", k);
		if (!json_is_number(b) || !(json_number_value(b) >= -100.0 && json_number_value(b) <= 100.0))
			return BAD(e, "logit_bias", "logit_bias['%.40s'] must be a number in [-100, 100]", k);
		r->bias_ids[r->n_bias] = (uint32_t)id;
		r->bias[r->n_bias++] = (float)json_number_value(b);
	}
	return 0;
}

/* chat: "logprobs": bool, "top_logprobs": 0..20 (only with logprobs true);
 * completions: "logprobs": 0..5 (null = none). */
static int parse_logprobs(json_t *o, int kind, struct oai_req *r, struct oai_err *e)
{
	json_t *v = field(o, "logprobs"), *t = field(o, "top_logprobs");
	long long x = 0;
	if (kind == OAI_COMPLETION) {
		if (t)
			return BAD(e, "top_logprobs", "'top_logprobs' is a chat completions field; "
				   "completions take 'logprobs': 0..%d", OAI_MAX_LOGPROBS_CMPL);
		if (v && !json_is_integer(v))
			return BAD(e, "logprobs", "'logprobs' must be an integer (0..%d) or null",
				   OAI_MAX_LOGPROBS_CMPL);
		if (get_int(o, "logprobs", 0, OAI_MAX_LOGPROBS_CMPL, &x, e))
			return -1;
		r->logprobs = v != NULL;
		r->top_logprobs = (uint32_t)x;
		return 0;
	}
	if (v && !json_is_boolean(v))
		return BAD(e, "logprobs", "'logprobs' must be a boolean");
	r->logprobs = v && json_is_true(v);
	if (!t)
		return 0;
	if (get_int(o, "top_logprobs", 0, OAI_MAX_TOP_LOGPROBS, &x, e))
		return -1;
	if (!r->logprobs)
		return BAD(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
	r->top_logprobs = (uint32_t)x;
	return 0;
}

static int parse_stop(json_t *o, struct oai_req *r, struct oai_err *e)
{
	json_t *v = field(o, "stop");
	if (!v)
		return 0;
	json_t *one[1] = { v };
	json_t **items = one;
	size_t n = 1;
	if (json_is_array(v)) {
		n = json_array_size(v);
		if (n > OAI_MAX_STOP)
			return BAD(e, "stop", "'stop' takes at most %d strings (got %zu)", OAI_MAX_STOP,
				   n);
		items = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *s = items ? items[i] : json_array_get(v, i);
		if (!json_is_string(s))
			return BAD(e, "stop", "'stop' must be a string or an array of strings");
		size_t l = json_string_length(s);
		if (l == 0 || l > OAI_MAX_STOP_LEN || strlen(json_string_value(s)) != l)
			return BAD(e, "stop", "stop strings must be 1..%d bytes without NUL",
				   OAI_MAX_STOP_LEN);
		r->stop[r->n_stop] = strdup(json_string_value(s));
		if (!r->stop[r->n_stop])
			return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
		r->n_stop++;
	}
	return 0;
}

/* The name of the function of call id in the assistant messages before i. */
static const char *call_name(json_t *msgs, size_t before, const char *id)
{
	for (size_t k = 0; id && k < before; k++) {
		json_t *tc = json_object_get(json_array_get(msgs, k), "tool_calls");
		size_t j;
		json_t *c;
		json_array_foreach(tc, j, c) {
			const char *cid = json_string_value(json_object_get(c, "id"));
			if (cid && !strcmp(cid, id))
				return json_string_value(json_object_get(json_object_get(c, "function"), "name"));
		}
	}
	return NULL;
}

/* A tool message's text (role tool: its result as chat_tool_result says;
 * assistant with tool_calls: its content, then the call, or several as one
 * JSON array, as the model is asked to write them). */
static int tool_message(json_t *it, const char *role, json_t *tc, json_t *msgs, size_t i, const char *content,
			char **out, struct oai_err *e)
{
	if (!strcmp(role, "tool")) {
		const char *id = json_string_value(json_object_get(it, "tool_call_id"));
		*out = chat_tool_result(call_name(msgs, i, id), id, content);
		return *out ? 0 : oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
	}
	if (!json_is_array(tc) || json_array_size(tc) > OAI_MAX_TOOLS)
		return BAD(e, "messages", "messages[%zu].tool_calls must be an array (at most %d)", i, OAI_MAX_TOOLS);
	size_t cap = strlen(content) + 2, n = strlen(content);
	char *t = malloc(cap);
	if (!t)
		return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
	memcpy(t, content, n + 1);
	size_t j;
	json_t *c;
	json_array_foreach(tc, j, c) {
		json_t *fn = json_object_get(c, "function");
		const char *name = json_string_value(json_object_get(fn, "name"));
		json_t *args = json_object_get(fn, "arguments");
		if (!name || (args && !json_is_string(args) && !json_is_object(args))) {
			free(t);
			return BAD(e, "messages", "messages[%zu].tool_calls[%zu] needs function.name and "
				   "function.arguments (a JSON string)", i, j);
		}
		/* arguments arrive as a JSON string: embedded as JSON when they are */
		char *a = NULL;
		if (json_is_string(args)) {
			json_t *pa = json_loads(json_string_value(args), 0, NULL);
			a = pa ? json_dumps(pa, JSON_COMPACT) : json_dumps(args, JSON_ENCODE_ANY | JSON_COMPACT);
			json_decref(pa);
		} else if (args) {
			a = json_dumps(args, JSON_COMPACT);
		} else {
			a = strdup("{}");
		}
		char *call = a ? chat_tool_call(name, a) : NULL;
		free(a);
		size_t cl = call ? strlen(call) : 0;
		char *nt = call ? realloc(t, n + cl + 4) : NULL;
		if (!nt) {
			free(call);
			free(t);
			return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
		}
		t = nt;
		bool many = json_array_size(tc) > 1;
		if (n && (!many || j == 0))
			t[n++] = '\n';
		if (many)
			t[n++] = j == 0 ? '[' : ',';
		memcpy(t + n, call, cl + 1);
		n += cl;
		free(call);
		if (many && j + 1 == json_array_size(tc)) {
			t[n++] = ']';
			t[n] = 0;
		}
	}
	*out = t;
	return 0;
}

static int parse_messages(json_t *o, struct oai_req *r, struct oai_err *e)
{
	json_t *m = field(o, "messages");
	if (!m)
		return BAD(e, "messages", "'messages' is required");
	if (!json_is_array(m) || json_array_size(m) == 0)
		return BAD(e, "messages", "'messages' must be a non-empty array");
	size_t n = json_array_size(m);
	if (n > OAI_MAX_MESSAGES)
		return BAD(e, "messages", "at most %d messages (got %zu)", OAI_MAX_MESSAGES, n);
	r->msgs = calloc(n, sizeof *r->msgs);
	if (!r->msgs)
		return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *it = json_array_get(m, i);
		if (!json_is_object(it))
			return BAD(e, "messages", "messages[%zu] must be an object", i);
		const char *role = json_string_value(json_object_get(it, "role"));
		if (!role)
			return BAD(e, "messages", "messages[%zu].role must be a string", i);
		if (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") &&
		    strcmp(role, "assistant") && strcmp(role, "tool"))
			return BAD(e, "messages", "messages[%zu].role '%.40s': must be system, user, "
				   "assistant or tool", i, role);
		/* "developer" is the newer spelling of "system" */
		r->msgs[i].role = strdup(strcmp(role, "developer") ? role : "system");
		r->n_msgs++;
		if (!r->msgs[i].role)
			return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
		json_t *c = field(it, "content");
		json_t *tc = field(it, "tool_calls");
		if (!c && !(tc && !strcmp(role, "assistant")))
			return BAD(e, "messages", "messages[%zu].content is required", i);
		if (c ? content_text(c, (uint32_t)i, !strcmp(role, "user"), r, &r->msgs[i].content, e)
		      : !(r->msgs[i].content = strdup("")))
			return c ? -1 : oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
		if (tc || !strcmp(role, "tool")) {
			char *t = NULL;
			if (tool_message(it, role, tc, m, i, r->msgs[i].content, &t, e))
				return -1;
			free(r->msgs[i].content);
			r->msgs[i].content = t;
		}
		total += strlen(r->msgs[i].content);
		if (total > OAI_MAX_PROMPT_BYTES)
			return BAD(e, "messages", "the messages hold more than %d bytes",
				   OAI_MAX_PROMPT_BYTES);
	}
	/* tool results are user turns: consecutive ones (several calls) become one */
	uint32_t w = 0;
	for (uint32_t i = 0; i < r->n_msgs; i++) {
		if (!strcmp(r->msgs[i].role, "tool")) {
			free(r->msgs[i].role);
			r->msgs[i].role = strdup("user");
			if (!r->msgs[i].role)
				return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
			if (w && !strcmp(r->msgs[w - 1].role, "user") && i && !strcmp(json_string_value(json_object_get(
								      json_array_get(m, i - 1), "role")), "tool")) {
				struct oai_msg *p = &r->msgs[w - 1];
				size_t a = strlen(p->content), b = strlen(r->msgs[i].content);
				char *t = realloc(p->content, a + b + 2);
				if (!t)
					return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
				t[a] = '\n';
				memcpy(t + a + 1, r->msgs[i].content, b + 1);
				p->content = t;
				free(r->msgs[i].role);
				free(r->msgs[i].content);
				r->msgs[i].role = r->msgs[i].content = NULL;
				continue;
			}
		}
		r->msgs[w++] = r->msgs[i];
	}
	r->n_msgs = w;
	return 0;
}

/* tools: [{"type": "function", "function": {"name", "description",
 * "parameters"}}], tool_choice: "none" | "auto" | "required" | {"type":
 * "function", "function": {"name"}}. The functions go into the prompt (a
 * system text before the first turn); required / named build the schema the
 * answer is constrained to. */
static int parse_tools(json_t *o, struct oai_req *r, struct oai_err *e)
{
	json_t *tools = field(o, "tools"), *tc = field(o, "tool_choice"), *par = field(o, "parallel_tool_calls");
	if (par && !json_is_boolean(par))
		return BAD(e, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
	r->parallel_calls = !par || json_is_true(par);
	if (!tools || (json_is_array(tools) && json_array_size(tools) == 0)) {
		if (tc && !(json_is_string(tc) && (!strcmp(json_string_value(tc), "none") ||
						   !strcmp(json_string_value(tc), "auto"))))
			return BAD(e, "tool_choice", "'tool_choice' needs 'tools'");
		return 0;
	}
	if (!json_is_array(tools) || json_array_size(tools) > OAI_MAX_TOOLS)
		return BAD(e, "tools", "'tools' must be an array of at most %d functions", OAI_MAX_TOOLS);
	if (r->json)
		return BAD(e, "response_format", "'response_format' json together with 'tools' is not supported");
	size_t n = json_array_size(tools);
	r->tool_names = calloc(n, sizeof *r->tool_names);
	if (!r->tool_names)
		return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
	r->tool_choice = OAI_TOOLS_AUTO;
	const char *named = NULL;
	if (json_is_string(tc)) {
		const char *c = json_string_value(tc);
		if (!strcmp(c, "none"))
			r->tool_choice = OAI_TOOLS_NONE;
		else if (!strcmp(c, "required"))
			r->tool_choice = OAI_TOOLS_REQUIRED;
		else if (strcmp(c, "auto"))
			return BAD(e, "tool_choice", "'tool_choice' must be none, auto, required or a function");
	} else if (tc) {
		named = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
		if (!json_is_object(tc) || !named)
			return BAD(e, "tool_choice", "'tool_choice' must be none, auto, required or "
				   "{\"type\": \"function\", \"function\": {\"name\": ...}}");
		r->tool_choice = OAI_TOOLS_NAMED;
		r->parallel_calls = false; /* exactly that function, once */
	}
	json_t *lines = json_array(), *alts = json_array(), *defs = json_object();
	int rc = -1;
	char *fl = NULL;
	bool found = !named;
	for (size_t i = 0; i < n; i++) {
		json_t *t = json_array_get(tools, i);
		json_t *fn = json_object_get(t, "function");
		const char *ty = json_string_value(json_object_get(t, "type"));
		const char *name = json_string_value(json_object_get(fn, "name"));
		json_t *params = json_object_get(fn, "parameters");
		if (!json_is_object(t) || (ty && strcmp(ty, "function")) || !name || !*name ||
		    (params && !json_is_object(params))) {
			BAD(e, "tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\", "
			    "\"description\", \"parameters\": {...}}}", i);
			goto out;
		}
		r->tool_names[r->n_tools] = strdup(name);
		if (!r->tool_names[r->n_tools++])
			goto nomem;
		json_t *line = json_pack("{s:s}", "name", name);
		json_t *desc = json_object_get(fn, "description");
		if (json_is_string(desc))
			json_object_set(line, "description", desc);
		json_object_set_new(line, "parameters", params ? json_incref(params) : json_pack("{s:s}", "type", "object"));
		json_array_append_new(lines, line);
		if (named && strcmp(name, named))
			continue;
		found = true;
		/* the call's schema; the function's $defs move to the root */
		json_t *pc = params ? json_deep_copy(params) : json_pack("{s:s}", "type", "object");
		json_t *pd = json_object_get(pc, "$defs");
		if (json_is_object(pd))
			json_object_update(defs, pd);
		json_object_del(pc, "$defs");
		json_object_del(pc, "$schema");
		json_t *alt = json_pack("{s:s, s:{s:{s:s}, s:o}, s:[s, s], s:b}", "type", "object", "properties", "name",
					"const", name, "arguments", pc, "required", "name", "arguments",
					"additionalProperties", 0);
		json_array_append_new(alts, alt);
	}
	if (!found) {
		BAD(e, "tool_choice", "tool_choice names '%.60s', which is not among the tools", named);
		goto out;
	}
	/* the functions, one per line, for the prompt */
	size_t cap = 1, len = 0;
	for (size_t i = 0; i < json_array_size(lines); i++) {
		char *l = json_dumps(json_array_get(lines, i), JSON_COMPACT);
		if (!l)
			goto nomem;
		size_t ll = strlen(l);
		char *nf = realloc(fl, cap + ll + 1);
		if (!nf) {
			free(l);
			goto nomem;
		}
		fl = nf;
		memcpy(fl + len, l, ll);
		len += ll;
		fl[len++] = '\n';
		cap += ll + 1;
		free(l);
	}
	if (fl)
		fl[len ? len - 1 : 0] = 0;
	if (r->tool_choice != OAI_TOOLS_NONE) {
		char *pre = chat_tools_preamble(fl ? fl : "", r->tool_choice >= OAI_TOOLS_REQUIRED, r->parallel_calls);
		if (!pre)
			goto nomem;
		/* into the system text (a leading system message, or a new one) */
		if (r->n_msgs && !strcmp(r->msgs[0].role, "system")) {
			char *c = NULL;
			if (asprintf(&c, "%s\n\n%s", pre, r->msgs[0].content) < 0) {
				free(pre);
				goto nomem;
			}
			free(pre);
			free(r->msgs[0].content);
			r->msgs[0].content = c;
		} else {
			struct oai_msg *nm = realloc(r->msgs, (r->n_msgs + 1) * sizeof *nm);
			if (!nm) {
				free(pre);
				goto nomem;
			}
			r->msgs = nm;
			memmove(nm + 1, nm, r->n_msgs * sizeof *nm);
			nm[0].role = strdup("system");
			nm[0].content = pre;
			r->n_msgs++;
			if (!nm[0].role)
				goto nomem;
		}
	}
	if (r->tool_choice == OAI_TOOLS_REQUIRED || r->tool_choice == OAI_TOOLS_NAMED) {
		json_t *root = json_array_size(alts) == 1 ? json_incref(json_array_get(alts, 0))
							   : json_pack("{s:O}", "anyOf", alts);
		/* required with parallel calls: a JSON array of one or more calls */
		if (r->parallel_calls)
			root = json_pack("{s:s, s:o, s:i, s:i}", "type", "array", "items", root, "minItems", 1, "maxItems",
					 TC_MAX_CALLS);
		if (!root)
			goto nomem;
		if (json_object_size(defs))
			json_object_set(root, "$defs", defs);
		char *txt = json_dumps(root, JSON_COMPACT);
		json_decref(root);
		if (!txt)
			goto nomem;
		size_t tl = strlen(txt);
		struct cs_schema *cs = NULL;
		int crc = tl > OAI_MAX_SCHEMA ? err_set(ERR_RANGE, "%zu bytes of function schemas (at most %d)", tl,
						       OAI_MAX_SCHEMA)
					      : cs_schema_compile(txt, tl, &cs);
		cs_schema_free(cs);
		if (crc) {
			free(txt);
			BAD(e, "tools", "the function parameters: %s", err_msg());
			goto out;
		}
		r->json = true;
		r->schema = txt;
		r->n_schema = tl;
	}
	rc = 0;
	goto out;
nomem:
	rc = oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
out:
	free(fl);
	json_decref(lines);
	json_decref(alts);
	json_decref(defs);
	return rc;
}

static int parse_prompt(json_t *o, struct oai_req *r, struct oai_err *e)
{
	json_t *p = field(o, "prompt");
	if (!p)
		return BAD(e, "prompt", "'prompt' is required");
	if (json_is_array(p)) {
		if (json_array_size(p) != 1 || !json_is_string(json_array_get(p, 0)))
			return BAD(e, "prompt", "'prompt' must be a string (or an array of one "
				   "string)");
		p = json_array_get(p, 0);
	}
	if (!json_is_string(p))
		return BAD(e, "prompt", "'prompt' must be a string");
	size_t l = json_string_length(p);
	if (l == 0)
		return BAD(e, "prompt", "'prompt' is empty");
	if (l > OAI_MAX_PROMPT_BYTES)
		return BAD(e, "prompt", "'prompt' is longer than %d bytes", OAI_MAX_PROMPT_BYTES);
	if (strlen(json_string_value(p)) != l)
		return BAD(e, "prompt", "'prompt' contains a NUL character");
	r->prompt = strdup(json_string_value(p));
	if (!r->prompt)
		return oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
	return 0;
}

int oai_parse(int kind, const char *body, size_t len, struct oai_req *out, struct oai_err *e)
{
	memset(out, 0, sizeof *out);
	out->kind = kind;
	out->max_tokens = OAI_DEFAULT_MAX_TOKENS;
	out->temperature = 1.0f;
	out->top_p = 1.0f;
	out->repetition_penalty = 1.0f;
	if (len > OAI_MAX_BODY)
		return oai_err_set(e, 413, "invalid_request_error", NULL, "body_too_large",
				   "the request body is larger than %u bytes", OAI_MAX_BODY);
	json_t *o = load(body, len, e);
	if (!o)
		return -1;
	int rc = -1;
	double d;
	long long x;
	json_t *v;
	if ((v = field(o, "model")) && !json_is_string(v)) {
		BAD(e, "model", "'model' must be a string");
		goto out;
	}
	if (unsupported(o, kind, e))
		goto out;
	if ((v = field(o, "stream")) && !json_is_boolean(v)) {
		BAD(e, "stream", "'stream' must be a boolean");
		goto out;
	}
	out->stream = v && json_is_true(v);
	if ((v = field(o, "stream_options"))) {
		json_t *u = json_object_get(v, "include_usage");
		if (!json_is_object(v) || (u && !json_is_boolean(u))) {
			BAD(e, "stream_options", "'stream_options' must be {\"include_usage\": bool}");
			goto out;
		}
		out->include_usage = json_is_true(u);
	}
	x = 1;
	if (get_int(o, "n", 1, OAI_MAX_N, &x, e)) {
		BAD(e, "n", "'n' must be 1..%d", OAI_MAX_N);
		goto out;
	}
	out->n = (uint32_t)x;
	x = OAI_DEFAULT_MAX_TOKENS;
	const char *mt = field(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
	if (get_int(o, mt, 1, OAI_MAX_TOKENS_CAP, &x, e))
		goto out;
	out->max_tokens = (uint32_t)x;
	d = 1.0;
	if (get_number(o, "temperature", 0.0, 2.0, &d, e))
		goto out;
	out->temperature = (float)d;
	d = 1.0;
	if (get_number(o, "top_p", 0.0, 1.0, &d, e))
		goto out;
	if (d <= 0.0) {
		BAD(e, "top_p", "'top_p' must be greater than 0");
		goto out;
	}
	out->top_p = (float)d;
	x = 0;
	if (get_int(o, "top_k", 0, 64, &x, e))
		goto out;
	out->top_k = (uint32_t)x;
	d = 0.0;
	if (get_number(o, "min_p", 0.0, 1.0, &d, e))
		goto out;
	out->min_p = (float)d;
	d = 1.0;
	if (get_number(o, "repetition_penalty", 0.0, 100.0, &d, e))
		goto out;
	if (d <= 0.0) {
		BAD(e, "repetition_penalty", "'repetition_penalty' must be greater than 0 "
		    "(1 = off)");
		goto out;
	}
	out->repetition_penalty = (float)d;
	d = 0.0;
	if (get_number(o, "presence_penalty", -2.0, 2.0, &d, e))
		goto out;
	out->presence_penalty = (float)d;
	d = 0.0;
	if (get_number(o, "frequency_penalty", -2.0, 2.0, &d, e))
		goto out;
	out->frequency_penalty = (float)d;
	if ((v = field(o, "seed"))) {
		if (!json_is_integer(v)) {
			BAD(e, "seed", "'seed' must be an integer");
			goto out;
		}
		out->has_seed = true;
		out->seed = (uint64_t)json_integer_value(v);
	}
	/* Unicorn extension: a per-request time limit in seconds (the server's
	 * --request-timeout caps it). */
	d = 0.0;
	if (get_number(o, "timeout", 0.0, OAI_MAX_TIMEOUT_S, &d, e))
		goto out;
	if (field(o, "timeout") && d <= 0.0) {
		BAD(e, "timeout", "'timeout' must be greater than 0 (seconds)");
		goto out;
	}
	out->timeout = d;
	if (parse_logprobs(o, kind, out, e))
		goto out;
	if (parse_stop(o, out, e))
		goto out;
	if (parse_response_format(o, out, e) || parse_logit_bias(o, out, e))
		goto out;
	if (kind == OAI_CHAT ? parse_messages(o, out, e) : parse_prompt(o, out, e))
		goto out;
	if (kind == OAI_CHAT && parse_tools(o, out, e))
		goto out;
	rc = 0;
out:
	json_decref(o);
	if (rc)
		oai_req_free(out);
	return rc;
}

int oai_parse_tokenize(const char *body, size_t len, char **text, bool *add_special,
		       struct oai_err *e)
{
	*text = NULL;
	*add_special = true;
	if (len > OAI_MAX_BODY)
		return oai_err_set(e, 413, "invalid_request_error", NULL, "body_too_large",
				   "the request body is larger than %u bytes", OAI_MAX_BODY);
	json_t *o = load(body, len, e);
	if (!o)
		return -1;
	int rc = -1;
	const char *k = field(o, "text") ? "text" : "prompt";
	json_t *t = field(o, k);
	json_t *a = field(o, "add_special");
	if (!json_is_string(t) || strlen(json_string_value(t)) != json_string_length(t)) {
		BAD(e, k, "'text' (or 'prompt') must be a string without NUL");
	} else if (json_string_length(t) > OAI_MAX_PROMPT_BYTES) {
		BAD(e, k, "'%s' is longer than %d bytes", k, OAI_MAX_PROMPT_BYTES);
	} else if (a && !json_is_boolean(a)) {
		BAD(e, "add_special", "'add_special' must be a boolean");
	} else {
		*add_special = !a || json_is_true(a);
		*text = strdup(json_string_value(t));
		rc = *text ? 0 : oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
	}
	json_decref(o);
	return rc;
}

int oai_parse_detokenize(const char *body, size_t len, uint32_t n_vocab, int32_t **ids,
			 size_t *n, struct oai_err *e)
{
	*ids = NULL;
	*n = 0;
	if (len > OAI_MAX_BODY)
		return oai_err_set(e, 413, "invalid_request_error", NULL, "body_too_large",
				   "the request body is larger than %u bytes", OAI_MAX_BODY);
	json_t *o = load(body, len, e);
	if (!o)
		return -1;
	int rc = -1;
	json_t *t = field(o, "tokens");
	if (!json_is_array(t)) {
		BAD(e, "tokens", "'tokens' must be an array of token ids");
		goto out;
	}
	size_t cnt = json_array_size(t);
	*ids = malloc((cnt ? cnt : 1) * sizeof **ids);
	if (!*ids) {
		oai_err_set(e, 500, "server_error", NULL, NULL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < cnt; i++) {
		json_t *v = json_array_get(t, i);
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) >= (json_int_t)n_vocab) {
			BAD(e, "tokens", "tokens[%zu] must be an integer in 0..%u", i, n_vocab - 1);
			free(*ids);
			*ids = NULL;
			goto out;
		}
		(*ids)[i] = (int32_t)json_integer_value(v);
	}
	*n = cnt;
	rc = 0;
out:
	json_decref(o);
	return rc;
}

const char *oai_finish_reason(uint32_t r)
{
	switch (r) {
	case MSG_END_STOP: return "stop";
	case MSG_END_LENGTH:
	case MSG_END_CONTEXT: return "length";
	case MSG_END_CANCELLED: return "cancelled";
	case MSG_END_TIMEOUT: return "timeout";
	case MSG_END_IMAGE: return "image";
	default: return "error";
	}
}

static char *dump(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

/* --- logprobs ------------------------------------------------------------ */

void oai_lp_tok_free(struct oai_lp_tok *t)
{
	free(t->bytes);
	for (uint32_t i = 0; i < t->n_top && i < OAI_MAX_TOP_LOGPROBS; i++)
		free(t->top[i].bytes);
	memset(t, 0, sizeof *t);
}

/* A token's text as a JSON string: itself when valid UTF-8 without NUL,
 * else OpenAI's spelling "bytes:\xNN..." of every byte. */
static json_t *lp_token_str(const char *b, size_t n)
{
	if (!n)
		return json_string("");
	json_t *s = memchr(b, 0, n) ? NULL : json_stringn(b, n);
	if (s)
		return s;
	char *t = malloc(6 + 4 * n + 1);
	if (!t)
		return NULL;
	size_t k = (size_t)sprintf(t, "bytes:");
	for (size_t i = 0; i < n; i++)
		k += (size_t)sprintf(t + k, "\\x%02x", (unsigned char)b[i]);
	s = json_stringn(t, k);
	free(t);
	return s;
}

static json_t *lp_bytes(const char *b, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n && a; i++)
		if (json_array_append_new(a, json_integer((unsigned char)b[i]))) {
			json_decref(a);
			a = NULL;
		}
	return a;
}

/* JSON numbers cannot be -inf/NaN: a token that impossible is reported at
 * the lowest float (OpenAI itself sends -9999.0 for such). */
static json_t *lp_num(float v)
{
	return json_real(isfinite(v) ? v : -9999.0);
}

static json_t *lp_json(int kind, const struct oai_lp_tok *t, uint32_t n)
{
	if (kind == OAI_CHAT) {
		json_t *content = json_array();
		for (uint32_t i = 0; i < n && content; i++) {
			json_t *top = json_array();
			for (uint32_t j = 0; j < t[i].n_top && top; j++) {
				const struct oai_lp_alt *a = &t[i].top[j];
				if (json_array_append_new(top, json_pack("{s:o, s:o, s:o}", "token",
						lp_token_str(a->bytes, a->len), "logprob", lp_num(a->logprob),
						"bytes", lp_bytes(a->bytes, a->len)))) {
					json_decref(top);
					top = NULL;
				}
			}
			json_t *it = top ? json_pack("{s:o, s:o, s:o, s:o}", "token",
					lp_token_str(t[i].bytes, t[i].len), "logprob", lp_num(t[i].logprob),
					"bytes", lp_bytes(t[i].bytes, t[i].len), "top_logprobs", top) : NULL;
			if (json_array_append_new(content, it)) {
				json_decref(content);
				content = NULL;
			}
		}
		return content ? json_pack("{s:o}", "content", content) : NULL;
	}
	json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
	bool ok = toks && lps && tops && offs;
	for (uint32_t i = 0; i < n && ok; i++) {
		json_t *d = json_object();
		for (uint32_t j = 0; j < t[i].n_top && d; j++) {
			const struct oai_lp_alt *a = &t[i].top[j];
			json_t *k = lp_token_str(a->bytes, a->len);
			if (!k || json_object_set_new(d, json_string_value(k), lp_num(a->logprob))) {
				json_decref(d);
				d = NULL;
			}
			json_decref(k);
		}
		/* the legacy API always lists the sampled token too */
		json_t *k = lp_token_str(t[i].bytes, t[i].len);
		if (!k || !d || json_object_set_new(d, json_string_value(k), lp_num(t[i].logprob))) {
			json_decref(d);
			d = NULL;
		}
		ok = k && d && !json_array_append_new(toks, k) && !json_array_append_new(lps, lp_num(t[i].logprob)) &&
		     !json_array_append_new(tops, d) && !json_array_append_new(offs, json_integer(t[i].text_offset));
		if (!ok && !d)
			json_decref(k);
	}
	if (!ok) {
		json_decref(toks);
		json_decref(lps);
		json_decref(tops);
		json_decref(offs);
		return NULL;
	}
	return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops,
			 "text_offset", offs);
}

char *oai_logprobs_json(int kind, const struct oai_lp_tok *t, uint32_t n)
{
	return dump(lp_json(kind, t, n));
}

static char log_hint[512] = "the cluster log";

void oai_set_log_hint(const char *hint)
{
	snprintf(log_hint, sizeof log_hint, "%s", hint ? hint : "the cluster log");
}

char *oai_response_json(int kind, const char *id, int64_t created, const char *model,
			const char *text, size_t text_len, const char *finish,
			uint32_t prompt_tokens, uint32_t completion_tokens)
{
	return oai_response_json_lp(kind, id, created, model, text, text_len, finish, prompt_tokens,
				    completion_tokens, false, NULL, 0);
}

char *oai_response_json_lp(int kind, const char *id, int64_t created, const char *model,
			   const char *text, size_t text_len, const char *finish,
			   uint32_t prompt_tokens, uint32_t completion_tokens, bool want_lp,
			   const struct oai_lp_tok *lp, uint32_t n_lp)
{
	json_t *choice, *lpo = want_lp ? lp_json(kind, lp, n_lp) : json_null();
	if (!lpo)
		return NULL;
	if (kind == OAI_CHAT)
		choice = json_pack("{s:i, s:{s:s, s:o}, s:o, s:s}", "index", 0, "message", "role",
				   "assistant", "content", json_text(text, text_len), "logprobs", lpo,
				   "finish_reason", finish);
	else
		choice = json_pack("{s:i, s:o, s:o, s:s}", "index", 0, "text", json_text(text, text_len),
				   "logprobs", lpo, "finish_reason", finish);
	if (!choice)
		return NULL;
	return dump(json_pack("{s:s, s:s, s:I, s:s, s:[o], s:{s:i, s:i, s:i}}", "id", id, "object",
			      kind == OAI_CHAT ? "chat.completion" : "text_completion", "created",
			      (json_int_t)created, "model", model, "choices", choice, "usage",
			      "prompt_tokens", (int)prompt_tokens, "completion_tokens",
			      (int)completion_tokens, "total_tokens",
			      (int)(prompt_tokens + completion_tokens)));
}

char *oai_chunk_json(int kind, const char *id, int64_t created, const char *model,
		     const char *text, size_t text_len, bool role_first, const char *finish)
{
	return oai_chunk_json_lp(kind, id, created, model, text, text_len, role_first, finish, NULL, 0);
}

char *oai_chunk_json_lp(int kind, const char *id, int64_t created, const char *model,
			const char *text, size_t text_len, bool role_first, const char *finish,
			const struct oai_lp_tok *lp, uint32_t n_lp)
{
	json_t *choice;
	json_t *fin = finish ? json_string(finish) : json_null();
	json_t *lpo = n_lp ? lp_json(kind, lp, n_lp) : json_null();
	if (!lpo) {
		json_decref(fin);
		return NULL;
	}
	if (kind == OAI_CHAT) {
		json_t *delta = json_object();
		if (role_first)
			json_object_set_new(delta, "role", json_string("assistant"));
		if (text)
			json_object_set_new(delta, "content", json_text(text, text_len));
		choice = json_pack("{s:i, s:o, s:o, s:o}", "index", 0, "delta", delta, "logprobs",
				   lpo, "finish_reason", fin);
	} else {
		choice = json_pack("{s:i, s:o, s:o, s:o}", "index", 0, "text", json_text(text, text_len),
				   "logprobs", lpo, "finish_reason", fin);
	}
	if (!choice)
		return NULL;
	json_t *chunk = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", id, "object",
				  kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion",
				  "created", (json_int_t)created, "model", model, "choices", choice);
	/* a stream that fails after its 200: the last chunk says why, as an
	 * OpenAI error object next to finish_reason "error" */
	if (chunk && finish && !strcmp(finish, "error")) {
		char m[600];
		snprintf(m, sizeof m, "the generation failed (a worker error; see %s)", log_hint);
		json_object_set_new(chunk, "error",
				    json_pack("{s:s, s:s, s:n, s:s}", "message", m, "type", "server_error", "param",
					      "code", "generation_failed"));
	}
	return dump(chunk);
}

char *oai_usage_chunk_json(int kind, const char *id, int64_t created, const char *model,
			   uint32_t prompt_tokens, uint32_t completion_tokens)
{
	return dump(json_pack("{s:s, s:s, s:I, s:s, s:[], s:{s:i, s:i, s:i}}", "id", id, "object",
			      kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion",
			      "created", (json_int_t)created, "model", model, "choices", "usage",
			      "prompt_tokens", (int)prompt_tokens, "completion_tokens",
			      (int)completion_tokens, "total_tokens",
			      (int)(prompt_tokens + completion_tokens)));
}

char *oai_sse_frame(const char *json, size_t *len)
{
	const char *body = json ? json : "[DONE]";
	size_t n = strlen(body) + 8;
	char *s = malloc(n + 1);
	if (!s)
		return NULL;
	snprintf(s, n + 1, "data: %s\n\n", body);
	*len = n;
	return s;
}

/* --- stop strings ------------------------------------------------------ */

void oai_stop_init(struct oai_stop *s, char *const *stop, uint32_t n_stop)
{
	memset(s, 0, sizeof *s);
	s->stop = (const char *const *)stop;
	s->n_stop = n_stop > OAI_MAX_STOP ? OAI_MAX_STOP : n_stop;
}

void oai_stop_free(struct oai_stop *s)
{
	free(s->held);
	s->held = NULL;
	s->n_held = 0;
}

/* Longest suffix of buf[n] that is a proper prefix of some stop string. */
static size_t partial_tail(const struct oai_stop *s, const char *buf, size_t n)
{
	size_t best = 0;
	for (uint32_t i = 0; i < s->n_stop; i++) {
		size_t l = strlen(s->stop[i]);
		for (size_t k = l - 1 < n ? l - 1 : n; k > best; k--)
			if (!memcmp(buf + n - k, s->stop[i], k)) {
				best = k;
				break;
			}
	}
	return best;
}

static char *copy(const char *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = 0;
	}
	return s;
}

int oai_stop_feed(struct oai_stop *s, const char *piece, size_t len, char **out,
		  size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	if (s->stopped)
		len = 0;
	char *buf = realloc(s->held, s->n_held + len + 1);
	if (!buf)
		return err_set(ERR_NOMEM, "openai: out of memory");
	s->held = buf;
	if (len)
		memcpy(buf + s->n_held, piece, len);
	size_t n = s->n_held + len;
	buf[n] = 0;
	/* earliest complete stop string wins */
	size_t cut = n;
	for (uint32_t i = 0; i < s->n_stop && !s->stopped; i++) {
		size_t l = strlen(s->stop[i]);
		for (size_t p = 0; l <= n && p + l <= n && p < cut; p++)
			if (!memcmp(buf + p, s->stop[i], l)) {
				cut = p;
				break;
			}
	}
	if (cut < n) {
		s->stopped = true;
		*out = copy(buf, cut);
		*out_len = cut;
		s->n_held = 0;
		return *out ? 0 : err_set(ERR_NOMEM, "openai: out of memory");
	}
	size_t keep = s->stopped ? 0 : partial_tail(s, buf, n);
	*out = copy(buf, n - keep);
	if (!*out)
		return err_set(ERR_NOMEM, "openai: out of memory");
	*out_len = n - keep;
	memmove(buf, buf + n - keep, keep);
	s->n_held = keep;
	return 0;
}

int oai_stop_flush(struct oai_stop *s, char **out, size_t *out_len)
{
	*out = copy(s->held ? s->held : "", s->stopped ? 0 : s->n_held);
	*out_len = *out ? (s->stopped ? 0 : s->n_held) : 0;
	s->n_held = 0;
	return *out ? 0 : err_set(ERR_NOMEM, "openai: out of memory");
}

bool oai_auth_ok(const char *header, const char *key)
{
	if (!key || !*key)
		return true;
	if (!header || strncmp(header, "Bearer ", 7))
		return false;
	const char *h = header + 7;
	while (*h == ' ')
		h++;
	size_t hl = strlen(h), kl = strlen(key);
	unsigned char diff = hl != kl;
	for (size_t i = 0; i < kl; i++)
		diff |= (unsigned char)(key[i] ^ (i < hl ? h[i] : 0));
	return diff == 0;
}

bool oai_host_is_loopback(const char *host)
{
	if (!host)
		return false;
	if (!strcmp(host, "localhost") || !strcmp(host, "::1") || !strcmp(host, "[::1]"))
		return true;
	struct in_addr a;
	if (inet_pton(AF_INET, host, &a) == 1)
		return (ntohl(a.s_addr) >> 24) == 127;
	return false;
}

/* --- custom answers (n > 1, tool calls) ------------------------------------ */

char *oai_choice_json(int kind, uint32_t index, const char *text, size_t len, const char *finish, bool want_lp,
		      const struct oai_lp_tok *lp, uint32_t n_lp, const char *tool_calls)
{
	json_t *lpo = want_lp ? lp_json(kind, lp, n_lp) : json_null();
	if (!lpo)
		return NULL;
	json_t *choice;
	if (kind == OAI_CHAT) {
		json_t *msg = json_pack("{s:s}", "role", "assistant");
		json_t *tc = tool_calls ? json_loads(tool_calls, 0, NULL) : NULL;
		if (tc) {
			json_object_set_new(msg, "content", json_null());
			json_object_set_new(msg, "tool_calls", tc);
		} else {
			json_object_set_new(msg, "content", json_text(text, len));
		}
		choice = json_pack("{s:i, s:o, s:o, s:s}", "index", (int)index, "message", msg, "logprobs", lpo,
				   "finish_reason", finish);
	} else {
		choice = json_pack("{s:i, s:o, s:o, s:s}", "index", (int)index, "text", json_text(text, len),
				   "logprobs", lpo, "finish_reason", finish);
	}
	return dump(choice);
}

char *oai_chunk_choice_json(int kind, uint32_t index, const char *text, size_t len, bool role_first,
			    const char *finish, const struct oai_lp_tok *lp, uint32_t n_lp, const char *tool_calls)
{
	json_t *fin = finish ? json_string(finish) : json_null();
	json_t *lpo = n_lp ? lp_json(kind, lp, n_lp) : json_null();
	if (!lpo) {
		json_decref(fin);
		return NULL;
	}
	json_t *choice;
	if (kind == OAI_CHAT) {
		json_t *delta = json_object();
		if (role_first)
			json_object_set_new(delta, "role", json_string("assistant"));
		json_t *tc = tool_calls ? json_loads(tool_calls, 0, NULL) : NULL;
		if (tc)
			json_object_set_new(delta, "tool_calls", tc);
		else if (text)
			json_object_set_new(delta, "content", json_text(text, len));
		choice = json_pack("{s:i, s:o, s:o, s:o}", "index", (int)index, "delta", delta, "logprobs", lpo,
				   "finish_reason", fin);
	} else {
		choice = json_pack("{s:i, s:o, s:o, s:o}", "index", (int)index, "text", json_text(text, len),
				   "logprobs", lpo, "finish_reason", fin);
	}
	return dump(choice);
}

char *oai_chunk_wrap(int kind, const char *id, int64_t created, const char *model, const char *choice)
{
	json_t *c = json_loads(choice, 0, NULL);
	if (!c)
		return NULL;
	return dump(json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", id, "object",
			      kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion", "created",
			      (json_int_t)created, "model", model, "choices", c));
}

char *oai_response_wrap(int kind, const char *id, int64_t created, const char *model, const char *choices,
			uint32_t prompt_tokens, uint32_t completion_tokens)
{
	json_t *c = json_loads(choices, 0, NULL);
	if (!c)
		return NULL;
	return dump(json_pack("{s:s, s:s, s:I, s:s, s:o, s:{s:i, s:i, s:i}}", "id", id, "object",
			      kind == OAI_CHAT ? "chat.completion" : "text_completion", "created",
			      (json_int_t)created, "model", model, "choices", c, "usage", "prompt_tokens",
			      (int)prompt_tokens, "completion_tokens", (int)completion_tokens, "total_tokens",
			      (int)(prompt_tokens + completion_tokens)));
}

char *oai_tool_calls_from(const char *text, size_t len, char *const *names, uint32_t n, bool parallel)
{
	struct tc_parser p;
	tc_init(&p, names, n, parallel);
	char *calls = NULL;
	if (!tc_feed(&p, text, len, NULL, NULL) && tc_end(&p, NULL, NULL, NULL))
		calls = tc_calls_json(&p);
	tc_free(&p);
	return calls;
}
