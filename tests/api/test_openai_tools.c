/* openai: response_format, logit_bias, n and tools parsing, the tool-call
 * answer out of a generated text, the custom answers' JSON (api/openai.c;
 * pure functions, no cluster). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "api/openai.h"

static int parse(int kind, const char *body, struct oai_req *r, struct oai_err *e)
{
	return oai_parse(kind, body, strlen(body), r, e);
}

Test(openai_tools, response_format_and_bias)
{
	struct oai_req r;
	struct oai_err e;
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
			   "{\"type\":\"json_object\"}}", &r, &e), 0, "%s", e.message);
	cr_assert(r.json);
	cr_assert_null(r.schema);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
			   "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"strict\":true,\"schema\":"
			   "{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"integer\"},\"a\":{\"type\":\"string\"}},"
			   "\"required\":[\"b\"]}}}}", &r, &e), 0, "%s", e.message);
	cr_assert(r.json);
	/* compact, the properties in their order */
	cr_assert_str_eq(r.schema, "{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"integer\"},\"a\":{\"type\":"
			 "\"string\"}},\"required\":[\"b\"]}");
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{\"12\":-100,\"7\":2.5},\"n\":3}", &r, &e),
		     0, "%s", e.message);
	cr_assert_eq(r.n, 3);
	cr_assert_eq(r.n_bias, 2);
	cr_assert_eq(r.bias_ids[0] + r.bias_ids[1], 19);
	oai_req_free(&r);
	const char *bad[][2] = {
		{ "{\"prompt\":\"x\",\"logit_bias\":{\"-1\":1}}", "logit_bias" },
		{ "{\"prompt\":\"x\",\"logit_bias\":{\"1\":\"a\"}}", "logit_bias" },
		{ "{\"prompt\":\"x\",\"logit_bias\":[1]}", "logit_bias" },
		{ "{\"prompt\":\"x\",\"n\":0}", "n" },
		{ "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\"}}", "response_format" },
		{ "{\"prompt\":\"x\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
		  "{\"type\":\"object\",\"allOf\":[]}}}}", "response_format" },
		{ "{\"prompt\":\"x\",\"tools\":[]}", "tools" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(parse(OAI_COMPLETION, bad[i][0], &r, &e), -1, "accepted %s", bad[i][0]);
		cr_assert_eq(e.status, 400);
		cr_assert_str_eq(e.param, bad[i][1], "%s: param %s", bad[i][0], e.param);
	}
}

#define TOOLS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"w\"," \
	"\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]"

Test(openai_tools, tools_render_into_the_messages)
{
	struct oai_req r;
	struct oai_err e;
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
			   "\"content\":\"Paris?\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
			   "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":"
			   "\\\"Paris\\\"}\"}},{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
			   "\"arguments\":\"{\\\"city\\\":\\\"Lyon\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
			   "\"content\":\"21 C\"},{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"19 C\"}]," TOOLS "}",
			   &r, &e), 0, "%s", e.message);
	cr_assert_eq(r.tool_choice, OAI_TOOLS_AUTO);
	cr_assert_eq(r.n_tools, 1);
	cr_assert_str_eq(r.tool_names[0], "get_weather");
	cr_assert_not(r.json, "auto is not constrained");
	/* system (preamble + the user's), user, assistant (the calls), one user turn of both results */
	cr_assert_eq(r.n_msgs, 4);
	cr_assert_str_eq(r.msgs[0].role, "system");
	cr_assert_not_null(strstr(r.msgs[0].content, "\"name\":\"get_weather\""), "%s", r.msgs[0].content);
	cr_assert_not_null(strstr(r.msgs[0].content, "Be brief."));
	cr_assert_str_eq(r.msgs[2].role, "assistant");
	/* two calls: one JSON array, as the model is asked to write several */
	cr_assert_not_null(strstr(r.msgs[2].content, "[{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}},"),
			   "%s", r.msgs[2].content);
	cr_assert_not_null(strstr(r.msgs[2].content, "Lyon"));
	cr_assert_str_eq(r.msgs[3].role, "user");
	cr_assert_not_null(strstr(r.msgs[3].content, "Result of get_weather (call c1): 21 C"), "%s", r.msgs[3].content);
	cr_assert_not_null(strstr(r.msgs[3].content, "(call c2): 19 C"));
	oai_req_free(&r);
	/* required: constrained to {name, arguments}; named the same with one function */
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"tool_choice\":"
			   "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}}", &r, &e), 0, "%s", e.message);
	cr_assert_eq(r.tool_choice, OAI_TOOLS_NAMED);
	cr_assert(r.json);
	cr_assert_not_null(strstr(r.schema, "\"const\":\"get_weather\""), "%s", r.schema);
	cr_assert(!strncmp(r.schema, "{\"type\":\"object\"", 16), "named: one call: %s", r.schema);
	cr_assert_not(r.parallel_calls);
	oai_req_free(&r);
	/* required: an array of one or more calls (parallel_tool_calls defaults
	 * to true), or one call with parallel_tool_calls false */
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"tool_choice\":"
			   "\"required\"}", &r, &e), 0, "%s", e.message);
	cr_assert(r.parallel_calls);
	cr_assert(!strncmp(r.schema, "{\"type\":\"array\"", 15), "%s", r.schema);
	cr_assert_not_null(strstr(r.schema, "\"minItems\":1"), "%s", r.schema);
	cr_assert_not_null(strstr(r.msgs[0].content, "JSON array of one or more calls"), "%s", r.msgs[0].content);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"tool_choice\":"
			   "\"required\",\"parallel_tool_calls\":false}", &r, &e), 0, "%s", e.message);
	cr_assert_not(r.parallel_calls);
	cr_assert(!strncmp(r.schema, "{\"type\":\"object\"", 16), "%s", r.schema);
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS
			   ",\"parallel_tool_calls\":1}", &r, &e), -1);
	cr_assert_str_eq(e.param, "parallel_tool_calls");
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"tool_choice\":"
			   "\"none\"}", &r, &e), 0, "%s", e.message);
	cr_assert_eq(r.tool_choice, OAI_TOOLS_NONE);
	cr_assert_eq(r.n_msgs, 1, "none: the functions stay out of the prompt");
	oai_req_free(&r);
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"tool_choice\":"
			   "\"sometimes\"}", &r, &e), -1);
	cr_assert_str_eq(e.param, "tool_choice");
	cr_assert_eq(parse(OAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":"
			   "\"function\",\"function\":{}}]}", &r, &e), -1);
	cr_assert_str_eq(e.param, "tools");
}

Test(openai_tools, tool_calls_out_of_text)
{
	char *names[] = { "get_weather", "add" };
	const char *t1 = " {\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n";
	char *c = oai_tool_calls_from(t1, strlen(t1), names, 2, false);
	cr_assert_not_null(c);
	json_t *j = json_loads(c, 0, NULL);
	json_t *call = json_array_get(j, 0);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(call, "function"), "name")), "add");
	/* the arguments as the model wrote them (what a stream's deltas add up to) */
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(call, "function"), "arguments")),
			 "{\"a\": 1, \"b\": 2}");
	cr_assert_null(json_object_get(call, "index"));
	json_decref(j);
	free(c);
	const char *fenced = "```json\n{\"name\":\"get_weather\",\"arguments\":{}}\n```";
	c = oai_tool_calls_from(fenced, strlen(fenced), names, 2, true);
	cr_assert_not_null(c);
	cr_assert_not_null(strstr(c, "\"arguments\":\"{}\""), "%s", c);
	free(c);
	const char *no[] = { "hello", "{\"name\":\"other\",\"arguments\":{}}", "{\"name\":\"add\",\"arguments\":3}",
			     "{\"name\":\"add\"", "", "{\"name\":\"add\",\"arguments\":{\"a\":}}", "[]", "[1, 2]",
			     "{\"answer\": 4}" };
	for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
		cr_assert_null(oai_tool_calls_from(no[i], strlen(no[i]), names, 2, false), "%s", no[i]);
	/* the custom answers' JSON */
	char *ch = oai_choice_json(OAI_CHAT, 2, "hi", 2, "stop", false, NULL, 0, NULL);
	char *arr = malloc(strlen(ch) + 3);
	sprintf(arr, "[%s]", ch);
	char *resp = oai_response_wrap(OAI_CHAT, "chatcmpl-x", 5, "m", arr, 3, 4);
	json_t *rj = json_loads(resp, 0, NULL);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(json_object_get(rj, "choices"), 0), "index")), 2);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(rj, "usage"), "total_tokens")), 7);
	json_decref(rj);
	free(resp);
	free(arr);
	free(ch);
}
