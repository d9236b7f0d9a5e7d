/* UTF-8 of generated text (issue 35 #2): the well-formedness rules, U+FFFD
 * for ill-formed and unfinished sequences, the coordinator's pieces (an
 * unfinished character held for the next token, U+FFFD at the end) and the
 * OpenAI JSON of a text that is not UTF-8. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/openai.h"
#include "common/utf8.h"
#include "coordinator/intake.h"

#define R UTF8_REPLACEMENT

static void check_san(const char *in, size_t n, const char *want)
{
	char *o;
	size_t len;
	cr_assert_eq(utf8_sanitize(in, n, &o, &len), 0);
	cr_assert_eq(len, strlen(want), "len %zu want %zu (%s)", len, strlen(want), o);
	cr_assert_eq(memcmp(o, want, len), 0, "got '%s' want '%s'", o, want);
	cr_assert(utf8_valid(o, len));
	free(o);
}

Test(utf8, sanitize)
{
	check_san("", 0, "");
	check_san("abc \xe2\x82\xac \xf0\x9f\x98\x80", 12, "abc \xe2\x82\xac \xf0\x9f\x98\x80");
	/* unfinished at the end: one U+FFFD (the 9259, 478 case: "Hello" + a lead byte) */
	check_san("Hello\xe2\x82", 7, "Hello" R);
	check_san("a\xf0\x9f\x98", 4, "a" R);
	/* maximal subparts, as Unicode and Python's errors="replace" */
	check_san("\xe2\x82" "A", 3, R "A");
	check_san("\xc0\x80", 2, R R);          /* overlong: both bytes bad */
	check_san("\xed\xa0\x80", 3, R R R);    /* surrogate */
	check_san("\xf4\x90\x80\x80", 4, R R R R); /* > U+10FFFF */
	check_san("\x80\xbf", 2, R R);          /* lone continuations */
	check_san("\xff" "x\xfe", 3, R "x" R);
	check_san("\xf0\x9f\x98" "b", 4, R "b");
	/* NUL is valid UTF-8 */
	char *o;
	size_t len;
	cr_assert_eq(utf8_sanitize("a\0b", 3, &o, &len), 0);
	cr_assert(len == 3 && !memcmp(o, "a\0b", 3));
	free(o);
}

Test(utf8, complete_len)
{
	cr_assert_eq(utf8_complete_len("abc", 3), 3);
	cr_assert_eq(utf8_complete_len("a\xe2\x82", 3), 1);
	cr_assert_eq(utf8_complete_len("a\xe2\x82\xac", 4), 4);
	cr_assert_eq(utf8_complete_len("\xf0\x9f\x98", 3), 0);
	cr_assert_eq(utf8_complete_len("a\xe2", 2), 1);
	/* ill-formed, not unfinished: nothing to wait for */
	cr_assert_eq(utf8_complete_len("a\xff", 2), 2);
	cr_assert_eq(utf8_complete_len("a\xc0", 2), 2);
	cr_assert_eq(utf8_complete_len("a\xe0\x80", 3), 3);
	cr_assert_eq(utf8_complete_len("a\x80\x80\x80", 4), 4);
}

static char *cat_pieces(const struct intake_req *r)
{
	size_t n = 0;
	for (uint32_t i = 0; i < r->n_gen; i++)
		n += strlen(r->pieces[i]);
	char *s = calloc(1, n + 1);
	for (uint32_t i = 0; i < r->n_gen; i++)
		strcat(s, r->pieces[i]);
	return s;
}

/* byte tokens: an unfinished character waits for the next token, every piece
 * is valid UTF-8, and what is unfinished at the end is U+FFFD */
Test(utf8, intake_pieces)
{
	struct intake_req r;
	memset(&r, 0, sizeof r);
	cr_assert_eq(intake_add_token(&r, 1, "Hi \xe2", 4), 0);
	cr_assert_str_eq(r.pieces[0], "Hi ");
	cr_assert_eq(intake_add_token(&r, 2, "\x82", 1), 0);
	cr_assert_str_eq(r.pieces[1], "");
	cr_assert_eq(intake_add_token(&r, 3, "\xac!", 2), 0);
	cr_assert_str_eq(r.pieces[2], "\xe2\x82\xac!");
	/* ill-formed bytes become U+FFFD at once */
	cr_assert_eq(intake_add_token(&r, 4, "\xff\x80x", 3), 0);
	cr_assert_str_eq(r.pieces[3], R R "x");
	/* a lead byte followed by a non-continuation */
	cr_assert_eq(intake_add_token(&r, 5, "\xf0", 1), 0);
	cr_assert_eq(intake_add_token(&r, 6, "y", 1), 0);
	cr_assert_str_eq(r.pieces[5], R "y");
	/* max_tokens cuts a character: U+FFFD on the last piece */
	cr_assert_eq(intake_add_token(&r, 7, "z\xf0\x9f", 3), 0);
	cr_assert_str_eq(r.pieces[6], "z");
	intake_finish(&r, MSG_END_LENGTH);
	cr_assert_str_eq(r.pieces[6], "z" R);
	char *all = cat_pieces(&r);
	cr_assert(utf8_valid(all, strlen(all)));
	free(all);
	intake_req_clear(&r);
}

/* the reply JSON of a text that is not UTF-8 is still a reply (it was an
 * empty one: curl 52, "internal error") */
Test(utf8, openai_reply_json)
{
	for (int kind = OAI_CHAT; kind <= OAI_COMPLETION; kind++) {
		char *s = oai_response_json(kind, "id", 1, "m", "ab\xe2\x82", 4, "length", 1, 2);
		cr_assert_not_null(s);
		json_t *j = json_loads(s, 0, NULL);
		cr_assert_not_null(j, "%s", s);
		json_t *c = json_array_get(json_object_get(j, "choices"), 0);
		const char *t = kind == OAI_CHAT ? json_string_value(json_object_get(json_object_get(c, "message"), "content"))
						 : json_string_value(json_object_get(c, "text"));
		cr_assert_str_eq(t, "ab" R);
		json_decref(j);
		free(s);
		s = oai_chunk_json(kind, "id", 1, "m", "\xff", 1, false, NULL);
		cr_assert_not_null(s);
		cr_assert_not_null(strstr(s, "\\ufffd") ? s : strstr(s, R), "%s", s);
		free(s);
	}
}
