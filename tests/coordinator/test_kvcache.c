/* The coordinator's KV bookkeeping: block accounting, the sliding-window ring,
 * prefix sharing through the cache, eviction and running out. */
#include <criterion/criterion.h>
#include <string.h>

#include "coordinator/kvcache.h"
#include "common/err.h"

/* 64 positions = 4 blocks per sequence; a 3-entry ring; 8 global and 6
 * local blocks; prefix unit 16 (one block). */
static struct kv_layout small(void)
{
	return (struct kv_layout){ .block = 16, .max_ctx = 64, .max_blocks = 4, .ring = 3, .n_global = 1,
				   .n_local = 5, .n_gblocks = 8, .n_lblocks = 6 };
}

static uint32_t *tab_of(struct kvc *k, uint32_t slot) { return k->tab + (size_t)slot * k->tab_len; }

Test(kvcache, reserve_ring_and_release)
{
	struct kvc k;
	struct kv_layout l = small();
	cr_assert_eq(kvc_init(&k, &l, 2, 16), 0, "%s", err_msg());
	uint32_t tok[64] = { 0 }, shared = 9;
	cr_assert_eq(kvc_start(&k, 0, tok, 10, &shared), 0, "%s", err_msg());
	cr_assert_eq(shared, 0u);
	cr_assert_eq(kvc_reserve(&k, 0, 40), 0, "%s", err_msg());
	struct kvc_stats st;
	kvc_stats(&k, &st);
	cr_assert_eq(st.g_free, 5u);
	cr_assert_eq(st.l_free, 3u);
	uint32_t *t = tab_of(&k, 0);
	uint32_t ring0 = t[4];
	cr_assert_neq(ring0, KVC_NONE);
	/* the fourth block takes ring entry 0: the block of logical 0 goes back */
	cr_assert_eq(kvc_reserve(&k, 0, 64), 0, "%s", err_msg());
	kvc_stats(&k, &st);
	cr_assert_eq(st.g_free, 4u);
	cr_assert_eq(st.l_free, 3u, "the ring keeps 3 local blocks");
	cr_assert_eq(kvc_reserve(&k, 0, 65), ERR_RANGE);
	/* the table as workers read it */
	uint32_t out[16];
	cr_assert_eq(kvc_table(&k, 0, out, 16), 0);
	cr_assert_eq(out[0], 7u);
	for (uint32_t i = 0; i < 7; i++)
		cr_assert_lt(out[1 + i], i < 4 ? 8u : 6u);
	cr_assert_eq(kvc_table(&k, 0, out, 7), ERR_RANGE);
	kvc_release(&k, 0);
	kvc_stats(&k, &st);
	cr_assert_eq(st.g_free, 8u);
	cr_assert_eq(st.l_free, 6u);
	cr_assert_eq(kvc_reserve(&k, 0, 16), ERR_STATE, "released slot");
	kvc_free(&k);
}

Test(kvcache, prefix_shared_then_cached)
{
	struct kvc k;
	struct kv_layout l = small();
	cr_assert_eq(kvc_init(&k, &l, 3, 16), 0, "%s", err_msg());
	uint32_t a[64], b[64], shared;
	for (uint32_t i = 0; i < 64; i++) {
		a[i] = 100 + i;
		b[i] = i < 40 ? a[i] : 7;
	}
	/* A: 48-token prompt, computed and registered (3 units) */
	cr_assert_eq(kvc_start(&k, 0, a, 48, &shared), 0);
	cr_assert_eq(shared, 0u);
	/* chunks of 32 then 16, each registered after it ran, as the coordinator does */
	cr_assert_eq(kvc_reserve(&k, 0, 32), 0, "%s", err_msg());
	kvc_register(&k, 0, a, 32, 48);
	struct kvc_stats st;
	kvc_stats(&k, &st);
	cr_assert_eq(st.entries, 2u);
	uint32_t a_ring0 = tab_of(&k, 0)[4];
	cr_assert_eq(kvc_reserve(&k, 0, 48), 0, "%s", err_msg());
	kvc_register(&k, 0, a, 48, 48);
	kvc_stats(&k, &st);
	cr_assert_eq(st.entries, 3u);
	/* the first generated token: logical block 3 takes ring entry 0 */
	cr_assert_eq(kvc_reserve(&k, 0, 49), 0, "%s", err_msg());
	cr_assert_neq(tab_of(&k, 0)[4], a_ring0);
	/* B shares the first 40 tokens: two whole units */
	cr_assert_eq(kvc_start(&k, 1, b, 50, &shared), 0);
	cr_assert_eq(shared, 32u);
	uint32_t *ta = tab_of(&k, 0), *tb = tab_of(&k, 1);
	cr_assert_eq(tb[0], ta[0]);
	cr_assert_eq(tb[1], ta[1]);
	cr_assert_eq(tb[2], KVC_NONE);
	cr_assert_eq(tb[4 + 0], a_ring0, "the cache kept A's ring block of logical 0");
	cr_assert_eq(tb[4 + 1], ta[4 + 1]);
	cr_assert_eq(kvc_reserve(&k, 1, 50), 0, "%s", err_msg());
	cr_assert_neq(tb[2], ta[2], "B's own third block");
	/* A prompt equal to A's in full shares all but the last unit (its last
	 * token must be computed) */
	kvc_release(&k, 1);
	kvc_release(&k, 0);
	kvc_stats(&k, &st);
	cr_assert_eq(st.entries, 3u, "the cache outlives its sequences");
	cr_assert_eq(st.g_free, 8u - 3u);
	cr_assert_eq(kvc_start(&k, 2, a, 48, &shared), 0);
	cr_assert_eq(shared, 32u);
	kvc_release(&k, 2);
	cr_assert_eq(kvc_start(&k, 2, a, 49, &shared), 0);
	cr_assert_eq(shared, 48u);
	kvc_stats(&k, &st);
	cr_assert_eq(st.hit_tokens, 32u + 32u + 48u);
	kvc_release(&k, 2);
	/* a different first token shares nothing */
	uint32_t c[64];
	memcpy(c, a, sizeof c);
	c[0] = 1;
	cr_assert_eq(kvc_start(&k, 2, c, 60, &shared), 0);
	cr_assert_eq(shared, 0u);
	kvc_release(&k, 2);
	kvc_flush(&k);
	kvc_stats(&k, &st);
	cr_assert_eq(st.entries, 0u);
	cr_assert_eq(st.g_free, 8u);
	cr_assert_eq(st.l_free, 6u);
	kvc_free(&k);
}

Test(kvcache, eviction_then_out_of_blocks)
{
	struct kvc k;
	struct kv_layout l = small();
	cr_assert_eq(kvc_init(&k, &l, 3, 16), 0, "%s", err_msg());
	uint32_t a[64], shared;
	for (uint32_t i = 0; i < 64; i++)
		a[i] = i;
	cr_assert_eq(kvc_start(&k, 0, a, 64, &shared), 0);
	/* registered all at once: the ring has moved past the first unit */
	cr_assert_eq(kvc_reserve(&k, 0, 64), 0);
	kvc_register(&k, 0, a, 64, 64);
	struct kvc_stats st;
	kvc_stats(&k, &st);
	cr_assert_eq(st.entries, 0u, "a unit whose ring block is gone cannot be cached");
	kvc_release(&k, 0);
	cr_assert_eq(kvc_start(&k, 0, a, 64, &shared), 0);
	for (uint32_t p = 16; p <= 64; p += 16) {
		cr_assert_eq(kvc_reserve(&k, 0, p), 0);
		kvc_register(&k, 0, a, p, 64);
	}
	kvc_release(&k, 0);
	kvc_stats(&k, &st);
	cr_assert_eq(st.entries, 4u);
	cr_assert(kvc_fits(&k, 64), "evictable blocks count as room");
	/* two other sequences take all 8 global blocks: the cache is evicted */
	uint32_t b[64] = { 0 };
	cr_assert_eq(kvc_start(&k, 1, b, 10, &shared), 0);
	cr_assert_eq(kvc_start(&k, 2, b, 10, &shared), 0);
	cr_assert_eq(kvc_reserve(&k, 1, 64), 0, "%s", err_msg());
	cr_assert_eq(kvc_reserve(&k, 2, 64), 0, "%s", err_msg());
	kvc_stats(&k, &st);
	cr_assert_eq(st.entries, 0u);
	cr_assert_eq(st.evictions, 4u);
	cr_assert_eq(st.g_free, 0u);
	cr_assert(!kvc_fits(&k, 16));
	/* nothing left to evict: a clear ERR_NOMEM, and the slot stays usable */
	cr_assert_eq(kvc_start(&k, 0, b, 10, &shared), 0);
	cr_assert_eq(kvc_reserve(&k, 0, 16), ERR_NOMEM);
	kvc_release(&k, 2);
	cr_assert_eq(kvc_reserve(&k, 0, 16), 0, "%s", err_msg());
	kvc_free(&k);
}

Test(kvcache, bad_arguments)
{
	struct kvc k;
	struct kv_layout l = small();
	cr_assert_eq(kvc_init(&k, &l, 0, 16), ERR_RANGE);
	cr_assert_eq(kvc_init(&k, &l, 2, 24), ERR_RANGE);
	cr_assert_eq(kvc_init(&k, &l, 2, 16), 0);
	uint32_t t[4] = { 0 }, shared;
	cr_assert_eq(kvc_start(&k, 2, t, 4, &shared), ERR_STATE);
	cr_assert_eq(kvc_start(&k, 0, t, 4, &shared), 0);
	cr_assert_eq(kvc_start(&k, 0, t, 4, &shared), ERR_STATE, "already live");
	kvc_free(&k);
}
