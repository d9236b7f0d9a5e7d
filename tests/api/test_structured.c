/* structured: response_format json_object / json_schema and logit_bias
 * through a real cluster (the demo model: Gemma 3's real vocabulary, random
 * weights, so nothing but the mask makes the output JSON). Every schema of
 * tests/constrain/jsv.c, streamed and not, all requests at once; every
 * output parses (jansson) and validates (tests/constrain/jsv.c, independent
 * of constrain/). Unsupported keywords and hostile schemas are 400s naming
 * the problem, and the cluster keeps serving. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/toolcall.h"
#include "constrain/constrain.h"
#include "tests/constrain/jsv.h"
#include "tests/proc.h"

struct job {
	char body_path[256], out_path[256];
	const char *schema;     /* NULL: json_object */
	bool stream, completion;
};

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *b = malloc(1 << 20);
	size_t n = fread(b, 1, (1 << 20) - 1, f);
	b[n] = 0;
	fclose(f);
	return b;
}

/* The text of an answer (content / text), streamed (SSE) or whole; finish
 * gets the finish_reason. */
static char *answer_text(const char *raw, bool stream, bool completion, char *finish, size_t cap)
{
	finish[0] = 0;
	if (!stream) {
		json_t *j = json_loads(raw, 0, NULL);
		cr_assert_not_null(j, "answer is not JSON: %.400s", raw);
		json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
		json_t *t = completion ? json_object_get(ch, "text") : json_object_get(json_object_get(ch, "message"), "content");
		cr_assert(json_is_string(t), "no text in %.400s", raw);
		snprintf(finish, cap, "%s", json_string_value(json_object_get(ch, "finish_reason")));
		char *s = strdup(json_string_value(t));
		json_decref(j);
		return s;
	}
	size_t cap_out = strlen(raw) + 1, n = 0;
	char *s = calloc(1, cap_out);
	for (const char *p = strstr(raw, "data: "); p; p = strstr(p + 1, "data: ")) {
		if (!strncmp(p + 6, "[DONE]", 6))
			break;
		const char *e = strstr(p, "\n\n");
		cr_assert_not_null(e);
		json_t *j = json_loadb(p + 6, (size_t)(e - p - 6), 0, NULL);
		cr_assert_not_null(j, "chunk is not JSON: %.200s", p);
		json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
		json_t *t = completion ? json_object_get(ch, "text") : json_object_get(json_object_get(ch, "delta"), "content");
		if (json_is_string(t)) {
			memcpy(s + n, json_string_value(t), json_string_length(t));
			n += json_string_length(t);
		}
		if (json_is_string(json_object_get(ch, "finish_reason")))
			snprintf(finish, cap, "%s", json_string_value(json_object_get(ch, "finish_reason")));
		json_decref(j);
	}
	return s;
}

/* The tiny golden model: a 32000-token SentencePiece vocabulary (JSON
 * pieces, byte fallback) and random weights. */
static void start(struct proc_cluster *c)
{
	proc_cluster_start(c, "json", (const char *const[]){ "--max-seqs", "16", NULL });
}

/* /detokenize drops a text's leading space, a generated piece keeps it */
static char *ltrim(char *s)
{
	while (*s == ' ')
		s++;
	return s;
}

static int post(const struct proc_cluster *c, const char *path, const char *body, char *out, size_t cap)
{
	char bp[256], cmd[1024];
	snprintf(bp, sizeof bp, "%s/body.json", c->tmp);
	FILE *f = fopen(bp, "w");
	fputs(body, f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "curl -s -w '\\n%%{http_code}' --max-time 120 http://127.0.0.1:%d%s -d @%s", c->port,
		 path, bp);
	proc_sh(cmd, out, cap);
	char *nl = strrchr(out, '\n');
	cr_assert_not_null(nl, "%s", out);
	*nl = 0;
	return atoi(nl + 1);
}

Test(structured, schemas_streamed_and_not_always_validate, .timeout = 300)
{
	struct proc_cluster c;
	start(&c);
	double t0 = proc_now_s();
	struct job jobs[80];
	uint32_t n = 0;
	/* every schema once whole and once streamed, json_object both ways, one completion */
	for (const char *const *sp = jsv_schemas; *sp && n + 3 < 76; sp++, n++)
		jobs[n] = (struct job){ .schema = *sp, .stream = n % 2 };
	jobs[n++] = (struct job){ .schema = NULL, .stream = false };
	jobs[n++] = (struct job){ .schema = NULL, .stream = true };
	jobs[n++] = (struct job){ .schema = jsv_schemas[1], .completion = true };
	size_t cap = 1 << 16;
	char *script = malloc(cap);
	size_t at = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		snprintf(j->body_path, sizeof j->body_path, "%s/b%u.json", c.tmp, i);
		snprintf(j->out_path, sizeof j->out_path, "%s/o%u.txt", c.tmp, i);
		char rf[40000];
		if (j->schema)
			snprintf(rf, sizeof rf, "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"t%u\",\"strict\":true,"
				 "\"schema\":%s}}", i, j->schema);
		else
			snprintf(rf, sizeof rf, "{\"type\":\"json_object\"}");
		/* the schema's shortest text must fit max_tokens (then the
		 * coordinator always completes the value) */
		uint32_t mt = 40;
		struct cs_schema *cs = NULL;
		if (j->schema && !cs_schema_compile(j->schema, strlen(j->schema), &cs) && cs_schema_min_len(cs) + 8 > mt)
			mt = cs_schema_min_len(cs) + 8;
		cs_schema_free(cs);
		FILE *f = fopen(j->body_path, "w");
		cr_assert_not_null(f);
		if (j->completion)
			fprintf(f, "{\"prompt\":\"JSON please:\",\"max_tokens\":48,\"temperature\":1,\"seed\":%u,"
				"\"response_format\":%s}", i, rf);
		else
			fprintf(f, "{\"messages\":[{\"role\":\"user\",\"content\":\"Answer in JSON.\"}],\"max_tokens\":%u,"
				"\"temperature\":%s,\"seed\":%u,\"stream\":%s,\"response_format\":%s}",
				mt, i % 5 == 4 ? "0" : "1.3", i, j->stream ? "true" : "false", rf);
		fclose(f);
		/* 12 at a time: within the coordinator's bound (16 running + 16 queued) */
		at += (size_t)snprintf(script + at, cap - at,
				       "curl -s -N --max-time 240 http://127.0.0.1:%d/v1/%s -d @%s -o %s &\n%s", c.port,
				       j->completion ? "completions" : "chat/completions", j->body_path, j->out_path,
				       i % 12 == 11 ? "wait\n" : "");
	}
	snprintf(script + at, cap - at, "wait\n");
	char sp[256], cmd[300], out[256];
	snprintf(sp, sizeof sp, "%s/all.sh", c.tmp);
	FILE *sf = fopen(sp, "w");
	cr_assert_not_null(sf);
	fputs(script, sf);
	fclose(sf);
	snprintf(cmd, sizeof cmd, "sh %s", sp);
	proc_sh(cmd, out, sizeof out);
	free(script);
	uint32_t valid = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		char *raw = slurp(j->out_path);
		cr_assert_not_null(raw, "no answer to request %u", i);
		char finish[32];
		char *text = answer_text(raw, j->stream, j->completion, finish, sizeof finish);
		json_error_t je;
		json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
		cr_assert_not_null(v, "request %u (schema %s, %s): output does not parse (%s): %s", i,
				   j->schema ? j->schema : "json_object", j->stream ? "streamed" : "whole", je.text, text);
		json_t *sc = json_loads(j->schema ? j->schema : "{\"type\":\"object\"}", 0, NULL);
		char why[128] = "";
		cr_assert(jsv_valid(v, sc, sc, why, sizeof why), "request %u (schema %s): %s does not validate: %s", i,
			  j->schema ? j->schema : "json_object", text, why);
		cr_assert_str_eq(finish, "stop", "request %u: finish_reason %s (%s)", i, finish, text);
		valid++;
		json_decref(v);
		json_decref(sc);
		free(text);
		free(raw);
	}
	cr_assert_geq(valid, 33);
	cr_log_info("structured: %u outputs (%u schemas) valid in %.1f s", valid, n / 2, proc_now_s() - t0);
	proc_cluster_stop(&c);
}

Test(structured, refusals_hostile_schemas_logit_bias_openai_sdk, .timeout = 240)
{
	struct proc_cluster c;
	start(&c);
	char *out = malloc(1 << 16);
	size_t cap = 1 << 16;
	/* an unsupported keyword is a 400 that names it */
	int st = post(&c, "/v1/chat/completions",
		      "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
		      "\"json_schema\":{\"name\":\"x\",\"schema\":{\"type\":\"object\",\"properties\":{\"e\":{\"type\":"
		      "\"string\",\"format\":\"email\"}}}}}}", out, cap);
	cr_assert_eq(st, 400, "%s", out);
	cr_assert_not_null(strstr(out, "format"), "%s", out);
	cr_assert_not_null(strstr(out, "response_format"), "%s", out);
	st = post(&c, "/v1/chat/completions",
		  "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"xml\"}}", out, cap);
	cr_assert_eq(st, 400, "%s", out);
	/* hostile: 300 levels deep, a 20000-value enum, a recursion without end */
	char *body = malloc(1 << 20);
	size_t at = (size_t)sprintf(body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
				    "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":");
	size_t base = at;
	for (int i = 0; i < 300; i++)
		at += (size_t)sprintf(body + at, "{\"type\":\"array\",\"items\":");
	at += (size_t)sprintf(body + at, "{}");
	for (int i = 0; i < 300; i++)
		body[at++] = '}';
	sprintf(body + at, "}}}");
	double t0 = proc_now_s();
	st = post(&c, "/v1/chat/completions", body, out, cap);
	cr_assert_eq(st, 400, "deep nesting: %.300s", out);
	at = base + (size_t)sprintf(body + base, "{\"enum\":[");
	for (int i = 0; i < 20000; i++)
		at += (size_t)sprintf(body + at, "%s\"v%d\"", i ? "," : "", i);
	sprintf(body + at, "]}}}}");
	st = post(&c, "/v1/chat/completions", body, out, cap);
	cr_assert_eq(st, 400, "huge enum: %.300s", out);
	sprintf(body + base, "{\"$defs\":{\"a\":{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#/$defs/a\"}},"
		"\"required\":[\"x\"]}},\"$ref\":\"#/$defs/a\"}}}}");
	st = post(&c, "/v1/chat/completions", body, out, cap);
	cr_assert_eq(st, 400, "endless recursion: %.300s", out);
	cr_assert_lt(proc_now_s() - t0, 20.0);
	free(body);
	/* a recursive schema that ends is served, depth-capped */
	st = post(&c, "/v1/chat/completions",
		  "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":40,\"seed\":5,\"response_format\":"
		  "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"t\",\"schema\":{\"type\":\"array\",\"items\":"
		  "{\"$ref\":\"#\"}}}}}", out, cap);
	cr_assert_eq(st, 200, "%s", out);
	char finish[32];
	char *text = answer_text(out, false, false, finish, sizeof finish);
	json_t *v = json_loads(text, 0, NULL);
	cr_assert(json_is_array(v), "%s", text);
	json_decref(v);
	free(text);
	/* the cluster still serves plain requests */
	st = post(&c, "/v1/completions", "{\"prompt\":\"Hello\",\"max_tokens\":4,\"temperature\":0}", out, cap);
	cr_assert_eq(st, 200, "%s", out);
	/* logit_bias: +100 forces a token at every step, -100 bans the greedy one */
	/* two tokens of the vocabulary (the pieces of "zebra") and their texts */
	st = post(&c, "/tokenize", "{\"text\":\"zebra\",\"add_special\":false}", out, cap);
	cr_assert_eq(st, 200, "%s", out);
	json_t *tk = json_loads(out, 0, NULL);
	cr_assert_geq(json_array_size(json_object_get(tk, "tokens")), 2, "%s", out);
	long long zid = json_integer_value(json_array_get(json_object_get(tk, "tokens"), 0));
	long long gid = json_integer_value(json_array_get(json_object_get(tk, "tokens"), 1));
	json_decref(tk);
	char b2[512], zt[64], zzz[200], gt[64];
	snprintf(b2, sizeof b2, "{\"tokens\":[%lld,%lld,%lld]}", zid, zid, zid);
	cr_assert_eq(post(&c, "/detokenize", b2, out, cap), 200, "%s", out);
	json_t *dt = json_loads(out, 0, NULL);
	snprintf(zzz, sizeof zzz, "%s", json_string_value(json_object_get(dt, "text")));
	json_decref(dt);
	snprintf(b2, sizeof b2, "{\"tokens\":[%lld]}", zid);
	cr_assert_eq(post(&c, "/detokenize", b2, out, cap), 200, "%s", out);
	dt = json_loads(out, 0, NULL);
	snprintf(zt, sizeof zt, "%s", json_string_value(json_object_get(dt, "text")));
	json_decref(dt);
	snprintf(b2, sizeof b2, "{\"tokens\":[%lld]}", gid);
	cr_assert_eq(post(&c, "/detokenize", b2, out, cap), 200, "%s", out);
	dt = json_loads(out, 0, NULL);
	snprintf(gt, sizeof gt, "%s", json_string_value(json_object_get(dt, "text")));
	json_decref(dt);
	/* +100 forces a token at every step */
	snprintf(b2, sizeof b2, "{\"prompt\":\"Hello\",\"max_tokens\":3,\"temperature\":0,\"logit_bias\":{\"%lld\":100}}",
		 zid);
	st = post(&c, "/v1/completions", b2, out, cap);
	cr_assert_eq(st, 200, "%s", out);
	text = answer_text(out, false, true, finish, sizeof finish);
	cr_assert_str_eq(ltrim(text), ltrim(zzz), "%s", out);
	free(text);
	/* -100 bans: the first at -100, the second at +99: the second wins */
	snprintf(b2, sizeof b2, "{\"prompt\":\"Hello\",\"max_tokens\":1,\"temperature\":0,\"logit_bias\":"
		 "{\"%lld\":100,\"%lld\":99}}", zid, gid);
	st = post(&c, "/v1/completions", b2, out, cap);
	text = answer_text(out, false, true, finish, sizeof finish);
	cr_assert_str_eq(ltrim(text), ltrim(zt), "%s", out);
	free(text);
	snprintf(b2, sizeof b2, "{\"prompt\":\"Hello\",\"max_tokens\":1,\"temperature\":0,\"logit_bias\":"
		 "{\"%lld\":-100,\"%lld\":99}}", zid, gid);
	st = post(&c, "/v1/completions", b2, out, cap);
	text = answer_text(out, false, true, finish, sizeof finish);
	cr_assert_str_eq(ltrim(text), ltrim(gt), "%s", out);
	free(text);
	st = post(&c, "/v1/completions", "{\"prompt\":\"Hello\",\"logit_bias\":{\"abc\":1}}", out, cap);
	cr_assert_eq(st, 400, "%s", out);
	st = post(&c, "/v1/completions", "{\"prompt\":\"Hello\",\"logit_bias\":{\"5\":101}}", out, cap);
	cr_assert_eq(st, 400, "%s", out);
	/* the official openai package: parse() with a zod schema, a tool loop */
	char cmd[512];
	snprintf(cmd, sizeof cmd, "node tests/openai_structured.mjs http://127.0.0.1:%d", c.port);
	st = proc_sh(cmd, out, cap);
	cr_assert_eq(st, 0, "tests/openai_structured.mjs failed (status %d): %s", st, out);
	free(out);
	proc_cluster_stop(&c);
}

static json_t *post_json(const struct proc_cluster *c, const char *body, int want)
{
	char *out = malloc(1 << 18);
	int st = post(c, "/v1/chat/completions", body, out, 1 << 18);
	cr_assert_eq(st, want, "status %d: %.600s", st, out);
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%.600s", out);
	free(out);
	return j;
}

#define WEATHER "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"the weather\"," \
	"\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12}," \
	"\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\",\"unit\"],\"additionalProperties\":false}}}," \
	"{\"type\":\"function\",\"function\":{\"name\":\"add\",\"parameters\":{\"type\":\"object\",\"properties\":" \
	"{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}}}]"
#define WEATHER_PARAMS_0 "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12}," \
	"\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\",\"unit\"],\"additionalProperties\":false}"
#define ADD_PARAMS "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}," \
	"\"required\":[\"a\",\"b\"]}"

#define TC_MAX TC_MAX_CALLS

/* One tool call of a whole answer: its name, and its arguments validate. */
static const char *check_call(json_t *ans)
{
	json_t *ch = json_array_get(json_object_get(ans, "choices"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls");
	json_t *msg = json_object_get(ch, "message");
	cr_assert(json_is_null(json_object_get(msg, "content")));
	json_t *call = json_array_get(json_object_get(msg, "tool_calls"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(call, "type")), "function");
	cr_assert(!strncmp(json_string_value(json_object_get(call, "id")), "call_", 5));
	json_t *fn = json_object_get(call, "function");
	const char *name = json_string_value(json_object_get(fn, "name"));
	json_t *args = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
	cr_assert_not_null(args, "arguments are not JSON: %s", json_string_value(json_object_get(fn, "arguments")));
	json_t *sc = json_loads(!strcmp(name, "add") ? ADD_PARAMS : WEATHER_PARAMS_0, 0, NULL);
	char why[128] = "";
	cr_assert(jsv_valid(args, sc, sc, why, sizeof why), "arguments of %s do not validate: %s", name, why);
	json_decref(sc);
	json_decref(args);
	return name;
}

/* The tool calls of a streamed answer, read from the raw SSE as OpenAI's
 * clients do, checking their shape: a call's first delta has index, id,
 * type, function.name and arguments "", its later ones only pieces of
 * function.arguments. choice: which choice's (n > 1). */
struct scalls {
	uint32_t n;
	char id[TC_MAX][40], name[TC_MAX][32];
	char args[TC_MAX][2048];
	uint32_t pieces[TC_MAX];     /* argument deltas with text */
	char finish[32];
	bool content;                /* some delta had content text */
};

static void stream_calls(const char *raw, int choice, struct scalls *sc)
{
	memset(sc, 0, sizeof *sc);
	for (const char *p = strstr(raw, "data: {"); p; p = strstr(p + 1, "data: {")) {
		const char *e = strstr(p, "\n\n");
		cr_assert_not_null(e);
		json_t *j = json_loadb(p + 6, (size_t)(e - p - 6), 0, NULL);
		cr_assert_not_null(j, "%.300s", p);
		json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
		if (json_integer_value(json_object_get(ch, "index")) != choice) {
			json_decref(j);
			continue;
		}
		json_t *d = json_object_get(ch, "delta");
		json_t *ct = json_object_get(d, "content");
		sc->content = sc->content || (json_is_string(ct) && json_string_length(ct) > 0);
		if (json_is_string(json_object_get(ch, "finish_reason")))
			snprintf(sc->finish, sizeof sc->finish, "%s", json_string_value(json_object_get(ch, "finish_reason")));
		size_t k;
		json_t *tc;
		json_array_foreach(json_object_get(d, "tool_calls"), k, tc) {
			json_t *ix = json_object_get(tc, "index"), *fn = json_object_get(tc, "function");
			cr_assert(json_is_integer(ix), "a tool_calls delta without index: %.300s", p);
			uint32_t i = (uint32_t)json_integer_value(ix);
			const char *a = json_string_value(json_object_get(fn, "arguments"));
			cr_assert_not_null(a, "a tool_calls delta without function.arguments: %.300s", p);
			if (i == sc->n) { /* a call starts: all of its header, arguments "" */
				cr_assert_lt(i, TC_MAX);
				const char *id = json_string_value(json_object_get(tc, "id"));
				const char *nm = json_string_value(json_object_get(fn, "name"));
				cr_assert(id && !strncmp(id, "call_", 5), "%.300s", p);
				cr_assert_str_eq(json_string_value(json_object_get(tc, "type")), "function");
				cr_assert(nm && *nm, "%.300s", p);
				cr_assert_str_eq(a, "", "the first delta's arguments are empty: %.300s", p);
				snprintf(sc->id[i], sizeof sc->id[i], "%s", id);
				snprintf(sc->name[i], sizeof sc->name[i], "%s", nm);
				sc->n++;
			} else {
				cr_assert_lt(i, sc->n, "a call index out of order: %.300s", p);
				cr_assert_eq(i, sc->n - 1, "arguments of an earlier call after a later one began: %.300s", p);
				cr_assert_null(json_object_get(tc, "id"), "%.300s", p);
				cr_assert_null(json_object_get(fn, "name"), "%.300s", p);
				strncat(sc->args[i], a, sizeof sc->args[i] - strlen(sc->args[i]) - 1);
				sc->pieces[i] += *a != 0;
			}
		}
		json_decref(j);
	}
}

/* The calls of a whole answer: each validates; their names and arguments. */
static uint32_t whole_calls(json_t *ans, char names[][32], char args[][2048])
{
	json_t *calls = json_object_get(json_object_get(json_array_get(json_object_get(ans, "choices"), 0), "message"),
					"tool_calls");
	size_t i;
	json_t *c;
	json_array_foreach(calls, i, c) {
		json_t *fn = json_object_get(c, "function");
		snprintf(names[i], 32, "%s", json_string_value(json_object_get(fn, "name")));
		snprintf(args[i], 2048, "%s", json_string_value(json_object_get(fn, "arguments")));
	}
	return (uint32_t)json_array_size(calls);
}

static void check_args(const char *name, const char *args)
{
	json_t *a = json_loads(args, 0, NULL);
	cr_assert_not_null(a, "arguments of %s are not JSON: %s", name, args);
	json_t *sc = json_loads(!strcmp(name, "add") ? ADD_PARAMS : WEATHER_PARAMS_0, 0, NULL);
	char why[128] = "";
	cr_assert(jsv_valid(a, sc, sc, why, sizeof why), "arguments of %s do not validate: %s (%s)", name, why, args);
	json_decref(sc);
	json_decref(a);
}

Test(structured, n_choices_and_tool_choice_modes, .timeout = 240)
{
	struct proc_cluster c;
	start(&c);
	/* n = 4: four choices, the same four again with the same seed, the
	 * first equal to n = 1 with that seed */
	const char *b4 = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me\"}],\"max_tokens\":8,\"temperature\":1,"
			 "\"seed\":11,\"n\":4}";
	json_t *a = post_json(&c, b4, 200), *b = post_json(&c, b4, 200);
	json_t *one = post_json(&c, "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me\"}],\"max_tokens\":8,"
				"\"temperature\":1,\"seed\":11}", 200);
	json_t *ca = json_object_get(a, "choices"), *cb = json_object_get(b, "choices");
	cr_assert_eq(json_array_size(ca), 4);
	int distinct = 0;
	for (size_t i = 0; i < 4; i++) {
		json_t *x = json_array_get(ca, i), *y = json_array_get(cb, i);
		cr_assert_eq(json_integer_value(json_object_get(x, "index")), (json_int_t)i);
		const char *tx = json_string_value(json_object_get(json_object_get(x, "message"), "content"));
		const char *ty = json_string_value(json_object_get(json_object_get(y, "message"), "content"));
		cr_assert_str_eq(tx, ty, "choice %zu differs between two runs with one seed", i);
		if (i)
			distinct += strcmp(tx, json_string_value(json_object_get(json_object_get(json_array_get(ca, 0),
											       "message"), "content"))) != 0;
	}
	cr_assert_gt(distinct, 0, "the choices should differ (seeds seed + index)");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_array_get(ca, 0), "message"), "content")),
			 json_string_value(json_object_get(json_object_get(json_array_get(json_object_get(one, "choices"), 0),
									  "message"), "content")));
	cr_assert_geq(json_integer_value(json_object_get(json_object_get(a, "usage"), "completion_tokens")), 4);
	json_decref(a);
	json_decref(b);
	json_decref(one);
	/* streamed n = 3: chunks of every index, one finish per choice */
	char *out = malloc(1 << 18);
	int st = post(&c, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":4,"
		      "\"seed\":3,\"n\":3,\"stream\":true}", out, 1 << 18);
	cr_assert_eq(st, 200);
	int finishes[3] = { 0 }, chunks[3] = { 0 };
	for (const char *p = strstr(out, "data: {"); p; p = strstr(p + 1, "data: {")) {
		const char *e = strstr(p, "\n\n");
		json_t *j = json_loadb(p + 6, (size_t)(e - p - 6), 0, NULL);
		json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
		json_int_t ix = json_integer_value(json_object_get(ch, "index"));
		cr_assert(ix >= 0 && ix < 3, "%.200s", p);
		chunks[ix]++;
		finishes[ix] += json_is_string(json_object_get(ch, "finish_reason"));
		json_decref(j);
	}
	for (int i = 0; i < 3; i++)
		cr_assert(chunks[i] >= 2 && finishes[i] == 1, "choice %d: %d chunks, %d finishes", i, chunks[i],
			  finishes[i]);
	cr_assert_not_null(strstr(out, "data: [DONE]"));
	cr_assert_eq(post(&c, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"n\":9}",
			  out, 1 << 18), 400);

	/* tools: required (any function), named, streamed named, none, auto */
	json_t *r = post_json(&c, "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],\"max_tokens\":120,"
			      "\"seed\":1,\"tools\":" WEATHER ",\"tool_choice\":\"required\"}", 200);
	check_call(r);
	json_decref(r);
	for (int seed = 2; seed < 5; seed++) {
		char body[2048];
		snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"1 + 2?\"}],\"max_tokens\":120,"
			 "\"seed\":%d,\"temperature\":1.2,\"tools\":" WEATHER ",\"tool_choice\":{\"type\":\"function\","
			 "\"function\":{\"name\":\"add\"}}}", seed);
		r = post_json(&c, body, 200);
		cr_assert_str_eq(check_call(r), "add");
		json_decref(r);
	}
	st = post(&c, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"Paris?\"}],\"max_tokens\":120,"
		  "\"seed\":1,\"stream\":true,\"tools\":" WEATHER ",\"tool_choice\":{\"type\":\"function\",\"function\":"
		  "{\"name\":\"get_weather\"}}}", out, 1 << 18);
	cr_assert_eq(st, 200);
	/* streamed as OpenAI does: the call's header, then its arguments piece by piece */
	struct scalls sc;
	stream_calls(out, 0, &sc);
	cr_assert_eq(sc.n, 1, "named: exactly one call: %.800s", out);
	cr_assert_str_eq(sc.name[0], "get_weather");
	cr_assert_str_eq(sc.finish, "tool_calls");
	cr_assert_gt(sc.pieces[0], 2, "arguments in pieces as generated, not one chunk: %.1200s", out);
	cr_assert_not(sc.content);
	check_args(sc.name[0], sc.args[0]);
	/* required, parallel calls (the default): streamed and whole give the
	 * same calls for a seed, each with its own index and id; some seed
	 * makes several */
	uint32_t most = 0;
	for (int seed = 1; seed <= 4; seed++) {
		char body[2048], names[TC_MAX][32], args[TC_MAX][2048];
		snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris and 1 + 2?\"}],"
			 "\"max_tokens\":160,\"seed\":%d,\"temperature\":1,\"tools\":" WEATHER ",\"tool_choice\":\"required\"}",
			 seed);
		r = post_json(&c, body, 200);
		uint32_t nw = whole_calls(r, names, args);
		json_decref(r);
		snprintf(body + strlen(body) - 1, sizeof body - strlen(body) + 1, ",\"stream\":true}");
		cr_assert_eq(post(&c, "/v1/chat/completions", body, out, 1 << 18), 200);
		stream_calls(out, 0, &sc);
		cr_assert_eq(sc.n, nw, "seed %d: %u calls streamed, %u whole", seed, sc.n, nw);
		cr_assert_geq(sc.n, 1);
		cr_assert_str_eq(sc.finish, "tool_calls", "seed %d", seed);
		for (uint32_t i = 0; i < sc.n; i++) {
			cr_assert_str_eq(sc.name[i], names[i], "seed %d call %u", seed, i);
			cr_assert_str_eq(sc.args[i], args[i], "seed %d call %u: streamed arguments differ", seed, i);
			check_args(sc.name[i], sc.args[i]);
			for (uint32_t k = 0; k < i; k++)
				cr_assert_str_neq(sc.id[i], sc.id[k], "each call its own id");
		}
		most = sc.n > most ? sc.n : most;
	}
	cr_assert_geq(most, 2, "no seed made parallel calls");
	/* parallel_tool_calls false: one call */
	for (int seed = 1; seed <= 2; seed++) {
		char body[2048], names[TC_MAX][32], args[TC_MAX][2048];
		snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"max_tokens\":120,"
			 "\"seed\":%d,\"temperature\":1,\"parallel_tool_calls\":false,\"tools\":" WEATHER ",\"tool_choice\":"
			 "\"required\"}", seed);
		r = post_json(&c, body, 200);
		cr_assert_eq(whole_calls(r, names, args), 1);
		check_args(names[0], args[0]);
		json_decref(r);
	}
	/* n = 2 streamed: each choice its own calls and finish */
	cr_assert_eq(post(&c, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],"
			  "\"max_tokens\":120,\"seed\":7,\"n\":2,\"stream\":true,\"tools\":" WEATHER ",\"tool_choice\":"
			  "{\"type\":\"function\",\"function\":{\"name\":\"add\"}}}", out, 1 << 18), 200);
	for (int i = 0; i < 2; i++) {
		stream_calls(out, i, &sc);
		cr_assert_eq(sc.n, 1, "choice %d", i);
		cr_assert_str_eq(sc.name[0], "add");
		cr_assert_str_eq(sc.finish, "tool_calls");
		check_args("add", sc.args[0]);
	}
	r = post_json(&c, "{\"messages\":[{\"role\":\"user\",\"content\":\"Paris?\"}],\"max_tokens\":6,\"seed\":1,"
		      "\"tools\":" WEATHER ",\"tool_choice\":\"none\"}", 200);
	json_t *ch = json_array_get(json_object_get(r, "choices"), 0);
	cr_assert(json_is_string(json_object_get(json_object_get(ch, "message"), "content")));
	cr_assert_null(json_object_get(json_object_get(ch, "message"), "tool_calls"));
	cr_assert_str_neq(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls");
	json_decref(r);
	/* auto: a text answer or a call, either well formed; with the history
	 * of a call and its result */
	r = post_json(&c, "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\","
		      "\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
		      "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"unit\\\":\\\"c\\\"}\"}}]},{\"role\":"
		      "\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"21 C\"}],\"max_tokens\":8,\"seed\":1,"
		      "\"tools\":" WEATHER "}", 200);
	ch = json_array_get(json_object_get(r, "choices"), 0);
	if (!strcmp(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls"))
		check_call(r);
	else
		cr_assert(json_is_string(json_object_get(json_object_get(ch, "message"), "content")));
	json_decref(r);
	/* refusals: an unknown function, an unsupported keyword in parameters */
	cr_assert_eq(post(&c, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":"
			  WEATHER ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}", out, 1 << 18),
		     400);
	cr_assert_eq(post(&c, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":"
			  "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
			  "\"properties\":{\"x\":{\"type\":\"number\",\"minimum\":0}}}}}],\"tool_choice\":\"required\"}",
			  out, 1 << 18), 400);
	cr_assert_not_null(strstr(out, "minimum"), "%s", out);
	free(out);
	proc_cluster_stop(&c);
}

/* The split placement (attention and FFN in two workers, the head on the
 * GPU worker's STAGE_BATCH / HEAD / FLOW ops) serves structured output,
 * constrained tool calls and logit_bias from the whole logit row too
 * (MSG_HEAD_FULL): all at once, beside plain requests whose greedy answers
 * stay what they are alone. */
Test(structured, split_placement_full_row, .timeout = 240)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "jsplit", (const char *const[]){ "--placement", "split", "--max-seqs", "8", NULL });
	char *out = malloc(1 << 18);
	const char *plain = "{\"prompt\":\"Once upon\",\"max_tokens\":12,\"temperature\":0}";
	cr_assert_eq(post(&c, "/v1/completions", plain, out, 1 << 18), 200, "%s", out);
	char *alone = answer_text(out, false, true, (char[32]){ 0 }, 32);
	/* a token to force with logit_bias */
	cr_assert_eq(post(&c, "/tokenize", "{\"text\":\"zebra\",\"add_special\":false}", out, 1 << 18), 200);
	json_t *tk = json_loads(out, 0, NULL);
	long long zid = json_integer_value(json_array_get(json_object_get(tk, "tokens"), 0));
	json_decref(tk);
	const char *schemas[] = { jsv_schemas[0], jsv_schemas[3], jsv_schemas[7], NULL /* json_object */ };
	char sp[256], cmd[512];
	snprintf(sp, sizeof sp, "%s/split.sh", c.tmp);
	FILE *f = fopen(sp, "w");
	cr_assert_not_null(f);
	for (int i = 0; i < 4; i++) {
		char rf[8192];
		if (schemas[i])
			snprintf(rf, sizeof rf, "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"s\",\"schema\":%s}}", schemas[i]);
		else
			snprintf(rf, sizeof rf, "{\"type\":\"json_object\"}");
		fprintf(f, "cat > %s/s%d.json <<'EOF_'\n{\"messages\":[{\"role\":\"user\",\"content\":\"JSON\"}],\"max_tokens\":80,"
			"\"seed\":%d,\"stream\":%s,\"response_format\":%s}\nEOF_\n", c.tmp, i, i, i % 2 ? "true" : "false", rf);
		fprintf(f, "curl -s -N --max-time 200 http://127.0.0.1:%d/v1/chat/completions -d @%s/s%d.json -o %s/o%d.txt &\n",
			c.port, c.tmp, i, c.tmp, i);
	}
	fprintf(f, "curl -s -N --max-time 200 http://127.0.0.1:%d/v1/chat/completions -o %s/tool.txt -d '{\"messages\":"
		"[{\"role\":\"user\",\"content\":\"Paris?\"}],\"max_tokens\":120,\"seed\":2,\"stream\":true,\"tools\":" WEATHER
		",\"tool_choice\":\"required\"}' &\n", c.port, c.tmp);
	fprintf(f, "curl -s --max-time 200 http://127.0.0.1:%d/v1/completions -o %s/bias.txt -d '{\"prompt\":\"Hello\","
		"\"max_tokens\":3,\"temperature\":0,\"logit_bias\":{\"%lld\":100}}' &\n", c.port, c.tmp, zid);
	fprintf(f, "curl -s --max-time 200 http://127.0.0.1:%d/v1/completions -o %s/plain.txt -d '%s' &\n", c.port, c.tmp,
		plain);
	/* a negligible bias: the full-row path, which must give the greedy answer
	 * (the row is the model's, not stale or another slot's) */
	fprintf(f, "curl -s --max-time 200 http://127.0.0.1:%d/v1/completions -o %s/row.txt -d '{\"prompt\":\"Once upon\","
		"\"max_tokens\":12,\"temperature\":0,\"logit_bias\":{\"%lld\":0.001}}' &\nwait\n", c.port, c.tmp, zid);
	fclose(f);
	snprintf(cmd, sizeof cmd, "sh %s", sp);
	proc_sh(cmd, out, 1 << 18);
	for (int i = 0; i < 4; i++) {
		char p[300], fin[32];
		snprintf(p, sizeof p, "%s/o%d.txt", c.tmp, i);
		char *raw = slurp(p);
		cr_assert_not_null(raw);
		char *text = answer_text(raw, i % 2, false, fin, sizeof fin);
		json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
		cr_assert_not_null(v, "split, schema %d: does not parse: %s (%.300s)", i, text, raw);
		json_t *sc = json_loads(schemas[i] ? schemas[i] : "{\"type\":\"object\"}", 0, NULL);
		char why[128] = "";
		cr_assert(jsv_valid(v, sc, sc, why, sizeof why), "split, schema %d: %s: %s", i, text, why);
		cr_assert_str_eq(fin, "stop", "split, schema %d: %s", i, text);
		json_decref(v);
		json_decref(sc);
		free(text);
		free(raw);
	}
	snprintf(sp, sizeof sp, "%s/tool.txt", c.tmp);
	char *raw = slurp(sp);
	struct scalls sc;
	stream_calls(raw, 0, &sc);
	cr_assert_geq(sc.n, 1, "%.600s", raw);
	cr_assert_str_eq(sc.finish, "tool_calls");
	for (uint32_t i = 0; i < sc.n; i++)
		check_args(sc.name[i], sc.args[i]);
	free(raw);
	/* +100 forces the token at every step */
	snprintf(sp, sizeof sp, "%s/bias.txt", c.tmp);
	raw = slurp(sp);
	char fin[32], b2[128];
	char *text = answer_text(raw, false, true, fin, sizeof fin);
	snprintf(b2, sizeof b2, "{\"tokens\":[%lld,%lld,%lld]}", zid, zid, zid);
	cr_assert_eq(post(&c, "/detokenize", b2, out, 1 << 18), 200);
	json_t *dt = json_loads(out, 0, NULL);
	cr_assert_str_eq(ltrim(text), ltrim((char *)json_string_value(json_object_get(dt, "text"))), "%s", raw);
	json_decref(dt);
	free(text);
	free(raw);
	/* the plain request beside them: what it gives alone */
	snprintf(sp, sizeof sp, "%s/plain.txt", c.tmp);
	raw = slurp(sp);
	text = answer_text(raw, false, true, fin, sizeof fin);
	cr_assert_str_eq(text, alone, "a plain greedy request changed beside constrained ones");
	free(text);
	free(raw);
	snprintf(sp, sizeof sp, "%s/row.txt", c.tmp);
	raw = slurp(sp);
	text = answer_text(raw, false, true, fin, sizeof fin);
	cr_assert_str_eq(text, alone, "greedy from the full row differs from the head's argmax");
	free(text);
	free(raw);
	free(alone);
	free(out);
	proc_cluster_stop(&c);
}

/* Schemas and logit_bias run on the GPU (fused): the top-k kernel adds the
 * biases and drops what the schema's mask does not allow before it ranks
 * (MSG_CHUNK_HEAD_BIAS), no logit row comes back. The same requests with
 * logprobs take the coordinator's full-row path; both must give the same
 * tokens, sampled and greedy, several at once beside plain requests. */
Test(structured, gpu_head_equals_full_row, .timeout = 180)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "jbias", (const char *const[]){ "--max-seqs", "12", NULL });
	const char *biases[] = { "{\"1000\":5,\"2000\":3,\"30\":-100,\"999\":4,\"5000\":4.5}",
				 "{\"17\":2.5,\"400\":6,\"12000\":-3,\"31000\":5,\"8\":1}" };
	char sp[256], cmd[512];
	snprintf(sp, sizeof sp, "%s/bias.sh", c.tmp);
	FILE *f = fopen(sp, "w");
	cr_assert_not_null(f);
	for (int i = 0; i < 4; i++) /* biases 0-1 sampled, then 0-1 greedy; each without and with logprobs */
		for (int lp = 0; lp < 2; lp++)
			fprintf(f, "curl -s --max-time 150 http://127.0.0.1:%d/v1/completions -o %s/b%d_%d.txt -d '{\"prompt\":"
				"\"Once upon a time\",\"max_tokens\":10,\"temperature\":%s,\"seed\":%d,\"logprobs\":%s,"
				"\"logit_bias\":%s}' &\n", c.port, c.tmp, i, lp, i < 2 ? "1" : "0", i, lp ? "2" : "null",
				biases[i % 2]);
	const char *schemas[] = { jsv_schemas[3], jsv_schemas[9], NULL };
	for (int i = 0; i < 3; i++)
		for (int lp = 0; lp < 2; lp++)
			fprintf(f, "curl -s --max-time 150 http://127.0.0.1:%d/v1/chat/completions -o %s/s%d_%d.txt -d '{"
				"\"messages\":[{\"role\":\"user\",\"content\":\"JSON\"}],\"max_tokens\":60,\"temperature\":%s,"
				"\"seed\":%d,\"logprobs\":%s,\"response_format\":{\"type\":\"json_%s\"%s%s%s}}' &\n", c.port, c.tmp,
				i, lp, i == 1 ? "0" : "1.2", i, lp ? "true" : "false", schemas[i] ? "schema" : "object",
				schemas[i] ? ",\"json_schema\":{\"name\":\"s\",\"schema\":" : "", schemas[i] ? schemas[i] : "",
				schemas[i] ? "}" : "");
	fprintf(f, "curl -s --max-time 150 http://127.0.0.1:%d/v1/completions -o %s/p.txt -d '{\"prompt\":\"Once upon a "
		"time\",\"max_tokens\":10,\"temperature\":0}' &\nwait\n", c.port, c.tmp);
	fclose(f);
	snprintf(cmd, sizeof cmd, "sh %s", sp);
	char out[256];
	proc_sh(cmd, out, sizeof out);
	snprintf(sp, sizeof sp, "%s/p.txt", c.tmp);
	char *raw = slurp(sp), fin[32];
	char *plain = answer_text(raw, false, true, fin, sizeof fin);
	free(raw);
	for (int i = 0; i < 4; i++) {
		char *t[2];
		for (int lp = 0; lp < 2; lp++) {
			snprintf(sp, sizeof sp, "%s/b%d_%d.txt", c.tmp, i, lp);
			raw = slurp(sp);
			cr_assert_not_null(raw);
			t[lp] = answer_text(raw, false, true, fin, sizeof fin);
			cr_assert_str_eq(fin, "length", "%s", raw);
			free(raw);
		}
		cr_assert_str_eq(t[0], t[1], "bias %d (%s): the GPU top-k and the full row disagree", i % 2,
				 i < 2 ? "sampled" : "greedy");
		cr_assert_str_neq(t[0], plain, "bias %d changed nothing", i);
		free(t[0]);
		free(t[1]);
	}
	free(plain);
	for (int i = 0; i < 3; i++) {
		char *t[2];
		for (int lp = 0; lp < 2; lp++) {
			snprintf(sp, sizeof sp, "%s/s%d_%d.txt", c.tmp, i, lp);
			raw = slurp(sp);
			cr_assert_not_null(raw);
			t[lp] = answer_text(raw, false, false, fin, sizeof fin);
			cr_assert_str_eq(fin, "stop", "%s", raw);
			free(raw);
		}
		cr_assert_str_eq(t[0], t[1], "schema %d: the GPU mask and the full row disagree", i);
		json_t *v = json_loads(t[0], JSON_DECODE_ANY, NULL);
		json_t *sc = json_loads(schemas[i] ? schemas[i] : "{\"type\":\"object\"}", 0, NULL);
		char why[128] = "";
		cr_assert(v && jsv_valid(v, sc, sc, why, sizeof why), "schema %d: %s: %s", i, t[0], why);
		json_decref(v);
		json_decref(sc);
		free(t[0]);
		free(t[1]);
	}
	/* the requests without logprobs ran on the GPU top-k, those with on the row */
	char *log = slurp(c.log);
	cr_assert_not_null(strstr(log, "logit_bias on the GPU top-k"), "no request took the GPU path");
	cr_assert_not_null(strstr(log, "schema mask on the GPU top-k"), "no schema took the GPU path");
	cr_assert_not_null(strstr(log, "full logit row"));
	free(log);
	proc_cluster_stop(&c);
}
