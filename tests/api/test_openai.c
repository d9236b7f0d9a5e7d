/* openai: request parsing/validation (every refusal with its status), stop
 * strings over streamed pieces, response and SSE framing. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/openai.h"
#include "chat/template.h"
#include "ipc/msg.h"

static int parse(int kind, const char *body, struct oai_req *r, struct oai_err *e)
{
	return oai_parse(kind, body, strlen(body), r, e);
}

Test(openai, chat_defaults_and_fields)
{
	struct oai_req r;
	struct oai_err e;
	cr_assert_eq(parse(OAI_CHAT,
			   "{\"model\":\"x\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
			   "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi \"},"
			   "{\"type\":\"text\",\"text\":\"there\"}]}],\"temperature\":0,\"seed\":7,"
			   "\"stop\":[\"a\",\"bc\"],\"max_tokens\":9,\"top_k\":5,\"top_p\":0.5,"
			   "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"n\":1,"
			   "\"presence_penalty\":0,\"user\":\"u\"}",
			   &r, &e), 0, "%s", e.message);
	cr_assert_eq(r.n_msgs, 2);
	cr_assert_str_eq(r.msgs[0].role, "system");
	cr_assert_str_eq(r.msgs[1].content, "hi there");
	cr_assert_eq(r.temperature, 0.0f);
	cr_assert(r.has_seed && r.seed == 7);
	cr_assert_eq(r.n_stop, 2);
	cr_assert_str_eq(r.stop[1], "bc");
	cr_assert_eq(r.max_tokens, 9);
	cr_assert_eq(r.top_k, 5);
	cr_assert_float_eq(r.top_p, 0.5f, 1e-6);
	cr_assert(r.stream && r.include_usage);
	oai_req_free(&r);

	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"Once\",\"stop\":\"x\"}", &r, &e), 0);
	cr_assert_str_eq(r.prompt, "Once");
	cr_assert_eq(r.max_tokens, OAI_DEFAULT_MAX_TOKENS);
	cr_assert_eq(r.temperature, 1.0f);
	cr_assert(!r.has_seed && !r.stream);
	cr_assert_eq(r.n_stop, 1);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":[\"One\"],\"max_completion_tokens\":3}", &r,
			   &e), 0);
	cr_assert_str_eq(r.prompt, "One");
	cr_assert_eq(r.max_tokens, 3);
	oai_req_free(&r);
}

/* Each bad body: its status and the parameter named. */
Test(openai, refusals)
{
	static const struct {
		int kind;
		const char *body, *param;
		int status;
	} t[] = {
		{ OAI_CHAT, "{bad", NULL, 400 },
		{ OAI_CHAT, "[1]", NULL, 400 },
		{ OAI_CHAT, "{}", "messages", 400 },
		{ OAI_CHAT, "{\"messages\":[]}", "messages", 400 },
		{ OAI_CHAT, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "messages", 400 },
		{ OAI_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", "messages", 400 },
		{ OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
		  "messages", 400 },
		/* jansson refuses \u0000 outright: a JSON error, no parameter */
		{ OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}", NULL,
		  400 },
		{ OAI_COMPLETION, "{}", "prompt", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"\"}", "prompt", 400 },
		{ OAI_COMPLETION, "{\"prompt\":[1,2]}", "prompt", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"n\":9}", "n", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":5000}", "max_tokens", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":1.5}", "max_tokens", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"temperature\":3}", "temperature", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"temperature\":\"hot\"}", "temperature", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"top_p\":0}", "top_p", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"top_k\":65}", "top_k", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"seed\":\"s\"}", "seed", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"stream\":1}", "stream", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"stop\":[\"\"]}", "stop", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"stop\":7}", "stop", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"presence_penalty\":2.5}", "presence_penalty", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"presence_penalty\":\"a\"}", "presence_penalty",
		  400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"frequency_penalty\":-2.1}", "frequency_penalty",
		  400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"repetition_penalty\":0}", "repetition_penalty",
		  400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"repetition_penalty\":-1}", "repetition_penalty",
		  400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"repetition_penalty\":101}", "repetition_penalty",
		  400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"min_p\":1.1}", "min_p", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"min_p\":-0.1}", "min_p", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"timeout\":0}", "timeout", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"timeout\":-1}", "timeout", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"timeout\":\"5s\"}", "timeout", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"timeout\":1e8}", "timeout", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":6}", "logprobs", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"top_logprobs\":2}", "top_logprobs", 400 },
		{ OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}",
		  "logprobs", 400 },
		{ OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}",
		  "top_logprobs", 400 },
		{ OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
			    "\"top_logprobs\":21}", "top_logprobs", 400 },
		{ OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}",
		  "tools", 400 },
		{ OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
			    "\"response_format\":{\"type\":\"xml\"}}", "response_format", 400 },
		{ OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
			    "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\","
			    "\"schema\":{\"type\":\"string\",\"pattern\":\"x\"}}}}", "response_format", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{\"1\":200}}", "logit_bias", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"echo\":true}", "echo", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"model\":3}", "model", 400 },
		{ OAI_COMPLETION, "{\"prompt\":\"x\",\"prompt\":\"y\"}", NULL, 400 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		struct oai_req r;
		struct oai_err e;
		cr_assert_eq(parse(t[i].kind, t[i].body, &r, &e), -1, "accepted: %s", t[i].body);
		cr_assert_eq(e.status, t[i].status, "%s: status %d", t[i].body, e.status);
		cr_assert_str_eq(e.type, "invalid_request_error");
		cr_assert_str_eq(e.param, t[i].param ? t[i].param : "", "%s: param '%s'", t[i].body,
				 e.param);
		cr_assert_gt(strlen(e.message), 5);
	}
	/* neutral values of unsupported parameters are accepted */
	struct oai_req r;
	struct oai_err e;
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"x\",\"frequency_penalty\":0,"
					   "\"logprobs\":null,\"echo\":false,\"n\":null}", &r, &e),
		     0, "%s", e.message);
	oai_req_free(&r);
}

Test(openai, penalties_and_min_p)
{
	struct oai_req r;
	struct oai_err e;
	/* defaults: all off */
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"x\"}", &r, &e), 0);
	cr_assert_eq(r.min_p, 0.0f);
	cr_assert_eq(r.repetition_penalty, 1.0f);
	cr_assert_eq(r.presence_penalty, 0.0f);
	cr_assert_eq(r.frequency_penalty, 0.0f);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
				     "\"min_p\":0.05,\"repetition_penalty\":1.1,"
				     "\"presence_penalty\":-2,\"frequency_penalty\":2}", &r, &e),
		     0, "%s", e.message);
	cr_assert_float_eq(r.min_p, 0.05f, 1e-7);
	cr_assert_float_eq(r.repetition_penalty, 1.1f, 1e-7);
	cr_assert_eq(r.presence_penalty, -2.0f);
	cr_assert_eq(r.frequency_penalty, 2.0f);
	oai_req_free(&r);
	/* the ends of the ranges, and null = default */
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"x\",\"min_p\":1,\"repetition_penalty\":"
					   "100,\"presence_penalty\":null,\"frequency_penalty\":-2}",
			   &r, &e), 0, "%s", e.message);
	cr_assert_eq(r.min_p, 1.0f);
	cr_assert_eq(r.repetition_penalty, 100.0f);
	cr_assert_eq(r.presence_penalty, 0.0f);
	cr_assert_eq(r.frequency_penalty, -2.0f);
	oai_req_free(&r);
}

/* Unicorn extension "timeout": seconds > 0; absent or null = 0 (the server's
 * limit applies). */
Test(openai, timeout_field)
{
	struct oai_req r;
	struct oai_err e;
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"x\"}", &r, &e), 0);
	cr_assert_eq(r.timeout, 0.0);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"x\",\"timeout\":null}", &r, &e), 0);
	cr_assert_eq(r.timeout, 0.0);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
				     "\"timeout\":0.25}", &r, &e), 0, "%s", e.message);
	cr_assert_eq(r.timeout, 0.25);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"x\",\"timeout\":30}", &r, &e), 0);
	cr_assert_eq(r.timeout, 30.0);
	oai_req_free(&r);
}

Test(openai, body_too_large)
{
	size_t n = OAI_MAX_BODY + 1;
	char *b = malloc(n);
	cr_assert_not_null(b);
	memset(b, ' ', n);
	struct oai_req r;
	struct oai_err e;
	cr_assert_eq(oai_parse(OAI_CHAT, b, n, &r, &e), -1);
	cr_assert_eq(e.status, 413);
	cr_assert_str_eq(e.code, "body_too_large");
	free(b);
}

Test(openai, error_json)
{
	struct oai_err e;
	oai_err_set(&e, 401, "invalid_request_error", NULL, "invalid_api_key", "bad %s", "key");
	char *s = oai_error_json(&e);
	json_t *j = json_loads(s, 0, NULL);
	cr_assert_not_null(j, "%s", s);
	json_t *er = json_object_get(j, "error");
	cr_assert_str_eq(json_string_value(json_object_get(er, "message")), "bad key");
	cr_assert_str_eq(json_string_value(json_object_get(er, "type")), "invalid_request_error");
	cr_assert(json_is_null(json_object_get(er, "param")));
	cr_assert_str_eq(json_string_value(json_object_get(er, "code")), "invalid_api_key");
	json_decref(j);
	free(s);
}

Test(openai, tokenize_bodies)
{
	char *text;
	bool add;
	struct oai_err e;
	cr_assert_eq(oai_parse_tokenize("{\"prompt\":\"hi\",\"add_special\":false}", 35, &text, &add,
					&e), 0);
	cr_assert_str_eq(text, "hi");
	cr_assert(!add);
	free(text);
	const char *b = "{\"text\":\"yo\"}";
	cr_assert_eq(oai_parse_tokenize(b, strlen(b), &text, &add, &e), 0);
	cr_assert(add);
	free(text);
	b = "{\"text\":3}";
	cr_assert_eq(oai_parse_tokenize(b, strlen(b), &text, &add, &e), -1);
	cr_assert_eq(e.status, 400);
	int32_t *ids;
	size_t n;
	b = "{\"tokens\":[1,2,99]}";
	cr_assert_eq(oai_parse_detokenize(b, strlen(b), 100, &ids, &n, &e), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(ids[2], 99);
	free(ids);
	cr_assert_eq(oai_parse_detokenize(b, strlen(b), 99, &ids, &n, &e), -1);
	cr_assert_eq(e.status, 400);
	cr_assert_str_eq(e.param, "tokens");
	b = "{\"tokens\":[-1]}";
	cr_assert_eq(oai_parse_detokenize(b, strlen(b), 100, &ids, &n, &e), -1);
	b = "{\"tokens\":\"1\"}";
	cr_assert_eq(oai_parse_detokenize(b, strlen(b), 100, &ids, &n, &e), -1);
}

/* Feed pieces through the cutter; returns the emitted text and whether it stopped. */
static char *run_stop(char *const *stop, uint32_t n_stop, const char *const *pieces, bool *stopped)
{
	struct oai_stop s;
	oai_stop_init(&s, stop, n_stop);
	static char acc[1024];
	acc[0] = 0;
	for (size_t i = 0; pieces[i]; i++) {
		char *out;
		size_t n;
		cr_assert_eq(oai_stop_feed(&s, pieces[i], strlen(pieces[i]), &out, &n), 0);
		cr_assert_eq(strlen(out), n);
		strcat(acc, out);
		free(out);
	}
	char *out;
	size_t n;
	cr_assert_eq(oai_stop_flush(&s, &out, &n), 0);
	strcat(acc, out);
	free(out);
	*stopped = s.stopped;
	oai_stop_free(&s);
	return acc;
}

Test(openai, stop_strings_across_pieces)
{
	char *stop[] = { "END", "\n\n" };
	bool st;
	const char *p1[] = { "Hello E", "N", "D and more", NULL };
	cr_assert_str_eq(run_stop(stop, 2, p1, &st), "Hello ");
	cr_assert(st);
	const char *p2[] = { "Hello E", "NX", " tail", NULL };
	cr_assert_str_eq(run_stop(stop, 2, p2, &st), "Hello ENX tail");
	cr_assert(!st);
	const char *p3[] = { "line\n", "\nnext", NULL };
	cr_assert_str_eq(run_stop(stop, 2, p3, &st), "line");
	cr_assert(st);
	const char *p4[] = { "ends with EN", NULL }; /* a partial stop at the end is text */
	cr_assert_str_eq(run_stop(stop, 2, p4, &st), "ends with EN");
	cr_assert(!st);
	const char *p5[] = { "aEND", "ignored", NULL };
	cr_assert_str_eq(run_stop(stop, 2, p5, &st), "a");
	const char *p6[] = { "xyz", NULL };
	cr_assert_str_eq(run_stop(NULL, 0, p6, &st), "xyz");
	/* the earliest stop string wins, whichever of the list it is */
	char *stop2[] = { "cd", "b" };
	const char *p7[] = { "abcd", NULL };
	cr_assert_str_eq(run_stop(stop2, 2, p7, &st), "a");
	/* held text is released as soon as it can no longer start a stop string */
	struct oai_stop s;
	oai_stop_init(&s, stop, 2);
	char *out;
	size_t n;
	cr_assert_eq(oai_stop_feed(&s, "abcE", 4, &out, &n), 0);
	cr_assert_str_eq(out, "abc");
	free(out);
	cr_assert_eq(oai_stop_feed(&s, "x", 1, &out, &n), 0);
	cr_assert_str_eq(out, "Ex");
	free(out);
	oai_stop_free(&s);
}

Test(openai, response_and_chunks)
{
	char *s = oai_response_json(OAI_CHAT, "chatcmpl-1", 123, "m", "hi", 2, "stop", 5, 2);
	json_t *j = json_loads(s, 0, NULL);
	cr_assert_not_null(j);
	cr_assert_str_eq(json_string_value(json_object_get(j, "object")), "chat.completion");
	cr_assert_str_eq(json_string_value(json_object_get(j, "id")), "chatcmpl-1");
	cr_assert_eq(json_integer_value(json_object_get(j, "created")), 123);
	json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c0, "message"), "content")),
			 "hi");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c0, "message"), "role")),
			 "assistant");
	cr_assert_str_eq(json_string_value(json_object_get(c0, "finish_reason")), "stop");
	json_t *u = json_object_get(j, "usage");
	cr_assert_eq(json_integer_value(json_object_get(u, "prompt_tokens")), 5);
	cr_assert_eq(json_integer_value(json_object_get(u, "completion_tokens")), 2);
	cr_assert_eq(json_integer_value(json_object_get(u, "total_tokens")), 7);
	json_decref(j);
	free(s);

	s = oai_response_json(OAI_COMPLETION, "cmpl-1", 1, "m", "a\"b", 3, "length", 1, 1);
	j = json_loads(s, 0, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(j, "object")), "text_completion");
	c0 = json_array_get(json_object_get(j, "choices"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(c0, "text")), "a\"b");
	json_decref(j);
	free(s);

	s = oai_chunk_json(OAI_CHAT, "c", 1, "m", "", 0, true, NULL);
	j = json_loads(s, 0, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(j, "object")), "chat.completion.chunk");
	c0 = json_array_get(json_object_get(j, "choices"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c0, "delta"), "role")),
			 "assistant");
	cr_assert(json_is_null(json_object_get(c0, "finish_reason")));
	json_decref(j);
	free(s);
	s = oai_chunk_json(OAI_CHAT, "c", 1, "m", NULL, 0, false, "length");
	j = json_loads(s, 0, NULL);
	c0 = json_array_get(json_object_get(j, "choices"), 0);
	cr_assert_eq(json_object_size(json_object_get(c0, "delta")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(c0, "finish_reason")), "length");
	json_decref(j);
	free(s);
	s = oai_usage_chunk_json(OAI_CHAT, "c", 1, "m", 3, 4);
	j = json_loads(s, 0, NULL);
	cr_assert_eq(json_array_size(json_object_get(j, "choices")), 0);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")), 7);
	json_decref(j);
	free(s);

	size_t n;
	s = oai_sse_frame("{\"a\":1}", &n);
	cr_assert_str_eq(s, "data: {\"a\":1}\n\n");
	cr_assert_eq(n, strlen(s));
	free(s);
	s = oai_sse_frame(NULL, &n);
	cr_assert_str_eq(s, "data: [DONE]\n\n");
	cr_assert_eq(n, 14);
	free(s);
}

Test(openai, finish_auth_loopback)
{
	cr_assert_str_eq(oai_finish_reason(MSG_END_STOP), "stop");
	cr_assert_str_eq(oai_finish_reason(MSG_END_LENGTH), "length");
	cr_assert_str_eq(oai_finish_reason(MSG_END_CONTEXT), "length");
	cr_assert_str_eq(oai_finish_reason(MSG_END_ERROR), "error");
	cr_assert_str_eq(oai_finish_reason(MSG_END_CANCELLED), "cancelled");
	cr_assert_str_eq(oai_finish_reason(MSG_END_TIMEOUT), "timeout");
	cr_assert(oai_auth_ok(NULL, NULL));
	cr_assert(oai_auth_ok("Bearer k1", "k1"));
	cr_assert(!oai_auth_ok("Bearer k2", "k1"));
	cr_assert(!oai_auth_ok("Bearer k1x", "k1"));
	cr_assert(!oai_auth_ok("Bearer k", "k1"));
	cr_assert(!oai_auth_ok("k1", "k1"));
	cr_assert(!oai_auth_ok(NULL, "k1"));
	cr_assert(oai_host_is_loopback("127.0.0.1"));
	cr_assert(oai_host_is_loopback("127.1.2.3"));
	cr_assert(oai_host_is_loopback("::1"));
	cr_assert(oai_host_is_loopback("localhost"));
	cr_assert(!oai_host_is_loopback("0.0.0.0"));
	cr_assert(!oai_host_is_loopback("192.168.1.2"));
	cr_assert(!oai_host_is_loopback("::"));
}

/* image_url parts: each URL kept in order, a CHAT_IMAGE_MARK where it was;
 * images outside user messages, too many, or without a url are refused. */
Test(openai, image_url_parts_are_kept)
{
	struct oai_req r;
	struct oai_err e;
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"what\"},"
				     "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}},"
				     "{\"type\":\"image_url\",\"image_url\":\"data:image/png;base64,BBBB\"}]}]}",
			   &r, &e), 0, "%s", e.message);
	cr_expect_eq(r.n_images, 2);
	cr_expect_str_eq(r.image_urls[1], "data:image/png;base64,BBBB");
	cr_expect_str_eq(r.msgs[0].content, "what" CHAT_IMAGE_MARK CHAT_IMAGE_MARK);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","
				     "\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:,\"}}]}]}",
			   &r, &e), -1);
	cr_expect(strstr(e.message, "images go in user messages"), "%s", e.message);
	char body[4096] = "{\"messages\":[{\"role\":\"user\",\"content\":[";
	for (int i = 0; i < 17; i++)
		strcat(body, i ? ",{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}"
			       : "{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}");
	strcat(body, "]}]}");
	cr_assert_eq(parse(OAI_CHAT, body, &r, &e), -1);
	cr_expect(strstr(e.message, "more than 16 images"), "%s", e.message);
}
