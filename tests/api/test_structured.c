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
	cr_assert_not_null(strstr(out, "\"tool_calls\":[{"), "%.800s", out);
	cr_assert_not_null(strstr(out, "\"finish_reason\":\"tool_calls\""), "%.800s", out);
	cr_assert_not_null(strstr(out, "\"name\":\"get_weather\""), "%.800s", out);
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
