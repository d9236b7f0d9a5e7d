/* prompt_parts: a long prompt's GEN_PROMPT parts (coordinator/prompt_parts.h): parts in
 * order make the whole prompt with GEN_REQ's tail; resends are harmless;
 * out-of-order, foreign and oversized parts are refused; the table is
 * bounded and entries of silent or gone clients are freed. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "coordinator/prompt_parts.h"

static struct msg_gen_prompt p; /* large: off the stack */

static void part(uint64_t id, uint32_t total, uint32_t off, uint32_t n, char fill)
{
	p.request_id = id, p.total = total, p.offset = off, p.n = n;
	memset(p.data, fill, n);
}

Test(prompt_parts, parts_make_the_whole_prompt)
{
	struct prompt_parts t = { 0 };
	uint32_t got = 0, total = 2 * MSG_MAX_PROMPT + 100;
	part(7, total, 0, MSG_MAX_PROMPT, 'a');
	cr_assert_eq(parts_add(&t, &p, 1, 10, &got), 0, "%s", err_msg());
	cr_assert_eq(got, MSG_MAX_PROMPT);
	cr_assert_eq(parts_add(&t, &p, 1, 11, &got), 0, "a resent part: %s", err_msg());
	cr_assert_eq(got, MSG_MAX_PROMPT, "a resend adds nothing");
	char *out = NULL;
	uint32_t len = 0;
	cr_assert_eq(parts_take(&t, 7, "z", 1, &out, &len), ERR_NOTFOUND, "not whole yet");
	part(7, total, 2 * MSG_MAX_PROMPT, 100, 'c');
	cr_assert_eq(parts_add(&t, &p, 1, 12, &got), ERR_INVAL, "a gap");
	part(7, total + 1, MSG_MAX_PROMPT, MSG_MAX_PROMPT, 'b');
	cr_assert_eq(parts_add(&t, &p, 1, 12, &got), ERR_INVAL, "another total");
	part(7, total, MSG_MAX_PROMPT, MSG_MAX_PROMPT, 'b');
	cr_assert_eq(parts_add(&t, &p, 1, 12, &got), 0, "%s", err_msg());
	/* a client that lost an answer stages again from 0: told how far it got */
	part(7, total, 0, MSG_MAX_PROMPT, 'a');
	cr_assert_eq(parts_add(&t, &p, 1, 12, &got), 0, "%s", err_msg());
	cr_assert_eq(got, 2 * MSG_MAX_PROMPT, "the staged bytes are kept: %u", got);
	part(7, total, 2 * MSG_MAX_PROMPT, 100, 'c');
	cr_assert_eq(parts_add(&t, &p, 1, 13, &got), 0, "%s", err_msg());
	cr_assert_eq(got, total);
	cr_assert_eq(parts_take(&t, 7, "zz", 2, &out, &len), 0, "%s", err_msg());
	cr_assert_eq(len, total + 2);
	cr_assert_eq(out[0], 'a');
	cr_assert_eq(out[MSG_MAX_PROMPT], 'b');
	cr_assert_eq(out[2 * MSG_MAX_PROMPT + 99], 'c');
	cr_assert_eq(memcmp(out + total, "zz", 3), 0, "the tail, then a NUL");
	free(out);
	cr_assert_eq(parts_count(&t), 0, "taken: the entry is free");
	cr_assert_eq(parts_take(&t, 7, "z", 1, &out, &len), ERR_NOTFOUND, "taken once");
	part(8, total, MSG_MAX_PROMPT, 10, 'x');
	cr_assert_eq(parts_add(&t, &p, 1, 14, &got), ERR_NOTFOUND, "a later part of nothing staged");
}

Test(prompt_parts, bounded_and_expiring)
{
	struct prompt_parts t = { 0 };
	uint32_t got;
	for (uint64_t id = 1; id <= PARTS_MAX; id++) {
		part(id, MSG_MAX_PROMPT_ALL, 0, 16, 'a');
		cr_assert_eq(parts_add(&t, &p, (uint32_t)id, (int64_t)id, &got), 0, "%s", err_msg());
	}
	part(100, 64, 0, 16, 'a');
	cr_assert_eq(parts_add(&t, &p, 9, 100, &got), ERR_RANGE, "a full table says busy");
	parts_drop_peer(&t, 3);
	cr_assert_eq(parts_count(&t), PARTS_MAX - 1);
	cr_assert_eq(parts_add(&t, &p, 9, 100, &got), 0, "a gone client's room: %s", err_msg());
	parts_expire(&t, 1000, 995); /* last parts at 1, 2, 4.. < 5 are idle */
	cr_assert_eq(parts_count(&t), PARTS_MAX - 3, "entries 1, 2 and 4 expired (3 dropped, 100 added): %u left", parts_count(&t));
	/* a staged prompt whose tail would pass the whole cap is refused and dropped */
	char *out = NULL;
	uint32_t len;
	struct prompt_parts u = { 0 };
	part(5, MSG_MAX_PROMPT_ALL, 0, MSG_MAX_PROMPT, 'q');
	uint32_t off = 0;
	while (off < MSG_MAX_PROMPT_ALL) {
		p.offset = off;
		cr_assert_eq(parts_add(&u, &p, 1, 1, &got), 0, "%s", err_msg());
		off += MSG_MAX_PROMPT;
	}
	cr_assert_eq(parts_take(&u, 5, "z", 1, &out, &len), ERR_RANGE);
	cr_assert_eq(parts_count(&u), 0);
	parts_clear(&t);
	cr_assert_eq(parts_count(&t), 0);
}
