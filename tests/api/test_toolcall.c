/* toolcall: the incremental tool-call scanner (api/toolcall.c) fed a reply
 * in pieces: what it reports and when (calls start as soon as their name
 * is read, arguments go out piece by piece, held text comes back as content). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "api/toolcall.h"

struct seen {
	char text[2048];
	size_t n_text;
	char args[TC_MAX_CALLS][512];
	char names[TC_MAX_CALLS][32];
	char ids[TC_MAX_CALLS][32];
	uint32_t n_calls;
	uint32_t n_args_ev;          /* arguments events */
	char log[4096];              /* the events in order: T (text) C<i> (call) A<i> (arguments) */
};

static int on_ev(void *arg, const struct tc_ev *ev)
{
	struct seen *s = arg;
	char e[16];
	if (ev->kind == TC_EV_TEXT) {
		memcpy(s->text + s->n_text, ev->s, ev->len);
		s->n_text += ev->len;
		snprintf(e, sizeof e, "T");
	} else if (ev->kind == TC_EV_CALL) {
		cr_assert_eq(ev->index, s->n_calls, "calls start in order");
		snprintf(s->names[ev->index], sizeof s->names[0], "%s", ev->name);
		snprintf(s->ids[ev->index], sizeof s->ids[0], "%s", ev->id);
		s->n_calls++;
		snprintf(e, sizeof e, "C%u", ev->index);
	} else {
		cr_assert_lt(ev->index, s->n_calls, "arguments of a call that started");
		strncat(s->args[ev->index], ev->s, ev->len);
		s->n_args_ev++;
		snprintf(e, sizeof e, "A%u", ev->index);
	}
	strcat(s->log, e);
	return 0;
}

/* Feed text in pieces of step bytes; true when it ended as whole calls. */
static bool scan(const char *text, size_t step, bool parallel, struct seen *s, struct tc_parser *p)
{
	static char *names[] = { "get_weather", "add" };
	memset(s, 0, sizeof *s);
	tc_init(p, names, 2, parallel);
	size_t n = strlen(text);
	for (size_t i = 0; i < n; i += step)
		cr_assert_eq(tc_feed(p, text + i, n - i < step ? n - i : step, on_ev, s), 0);
	return tc_end(p, on_ev, s, NULL);
}

Test(toolcall, arguments_stream_piece_by_piece)
{
	struct seen s;
	struct tc_parser p;
	const char *t = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par\\\"is}\", \"unit\": [\"c\"]}}";
	cr_assert(scan(t, 3, true, &s, &p));
	cr_assert_eq(s.n_calls, 1);
	cr_assert_str_eq(s.names[0], "get_weather");
	cr_assert(!strncmp(s.ids[0], "call_", 5) && strlen(s.ids[0]) == 29, "%s", s.ids[0]);
	cr_assert_str_eq(s.args[0], "{\"city\": \"Par\\\"is}\", \"unit\": [\"c\"]}");
	cr_assert_gt(s.n_args_ev, 5, "arguments in pieces, not one chunk: %s", s.log);
	cr_assert_eq(s.log[0], 'C', "the call starts before its arguments: %s", s.log);
	cr_assert_eq(s.n_text, 0);
	/* the whole answer: the same arguments */
	char *j = tc_calls_json(&p);
	json_t *a = json_loads(j, 0, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_array_get(a, 0), "function"), "arguments")),
			 s.args[0]);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(a, 0), "id")), s.ids[0]);
	json_decref(a);
	free(j);
	tc_free(&p);
	/* deltas as OpenAI streams them */
	struct tc_ev ev = { TC_EV_CALL, 1, "call_x", "add", NULL, 0 };
	j = tc_delta_json(&ev);
	cr_assert_str_eq(j, "[{\"index\":1,\"id\":\"call_x\",\"type\":\"function\",\"function\":{\"name\":\"add\","
			 "\"arguments\":\"\"}}]");
	free(j);
	ev = (struct tc_ev){ TC_EV_ARGS, 1, "call_x", "add", "{\"a\"", 4 };
	j = tc_delta_json(&ev);
	cr_assert_str_eq(j, "[{\"index\":1,\"function\":{\"arguments\":\"{\\\"a\\\"\"}}]");
	free(j);
}

Test(toolcall, several_calls_array_sequence_and_one_only)
{
	struct seen s;
	struct tc_parser p;
	const char *arr = " [{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2}}, {\"name\":\"get_weather\",\"arguments\":"
			  "{\"city\":\"Oslo\"}}]";
	for (size_t step = 1; step < 9; step += 3) {
		cr_assert(scan(arr, step, true, &s, &p));
		cr_assert_eq(s.n_calls, 2);
		cr_assert_str_eq(s.names[1], "get_weather");
		cr_assert_str_eq(s.args[0], "{\"a\":1,\"b\":2}");
		cr_assert_str_eq(s.args[1], "{\"city\":\"Oslo\"}");
		cr_assert_str_neq(s.ids[0], s.ids[1]);
		cr_assert_not_null(strstr(s.log, "A0C1"), "call 0's arguments end before call 1 starts: %s", s.log);
		char *j = tc_calls_json(&p);
		json_t *a = json_loads(j, 0, NULL);
		cr_assert_eq(json_array_size(a), 2);
		json_decref(a);
		free(j);
		tc_free(&p);
	}
	/* objects one after the other, in a fence; arguments missing: {} */
	cr_assert(scan("```json\n{\"name\":\"add\"}\n{\"parameters\":{\"city\":\"x\"},\"name\":\"get_weather\"}\n```", 2,
		       true, &s, &p));
	cr_assert_eq(s.n_calls, 2);
	cr_assert_str_eq(s.args[0], "{}");
	cr_assert_str_eq(s.args[1], "{\"city\":\"x\"}", "arguments before the name go out with the call");
	tc_free(&p);
	/* parallel_tool_calls false: the first call only */
	cr_assert(scan(arr, 4, false, &s, &p));
	cr_assert_eq(s.n_calls, 1);
	char *j = tc_calls_json(&p);
	json_t *a = json_loads(j, 0, NULL);
	cr_assert_eq(json_array_size(a), 1);
	json_decref(a);
	free(j);
	tc_free(&p);
}

Test(toolcall, content_held_then_given_back)
{
	struct seen s;
	struct tc_parser p;
	const char *texts[] = { "The weather is fine.", "  {\"answer\": 42} and more", "{\"name\":\"nope\",\"arguments\":{}}",
				"[1, 2]", "   " };
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		cr_assert_not(scan(texts[i], 2, true, &s, &p), "%s", texts[i]);
		cr_assert_eq(s.n_calls, 0, "%s", texts[i]);
		cr_assert_eq(s.n_text, strlen(texts[i]), "all of '%s' back as content", texts[i]);
		cr_assert(!memcmp(s.text, texts[i], s.n_text));
		cr_assert_null(tc_calls_json(&p));
		tc_free(&p);
	}
	/* plain text streams as it comes once decided */
	memset(&s, 0, sizeof s);
	static char *names[] = { "add" };
	tc_init(&p, names, 1, true);
	cr_assert_eq(tc_feed(&p, "Hi", 2, on_ev, &s), 0);
	cr_assert_eq(s.n_text, 2, "decided at the first byte");
	tc_free(&p);
	/* a call cut short (max_tokens): started, never whole */
	cr_assert_not(scan("{\"name\":\"add\",\"arguments\":{\"a\":1", 5, true, &s, &p));
	cr_assert_eq(s.n_calls, 1);
	cr_assert_str_eq(s.args[0], "{\"a\":1");
	cr_assert_null(tc_calls_json(&p));
	tc_free(&p);
	/* a broken second call: not whole calls */
	cr_assert_not(scan("[{\"name\":\"add\",\"arguments\":{}},{\"name\":\"zzz\"}]", 7, true, &s, &p));
	tc_free(&p);
}
