/* The paged KV cache: the pool plan (ipc/kvlayout.h) and the engine running
 * sequences whose block tables scatter their positions over the pools, share a
 * prompt prefix and wrap a sliding-window ring, against the CPU reference. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_worker/engine.h"
#include "common/err.h"
#include "ipc/kvlayout.h"
#include "formats/model.h"
#include "ref/ref.h"
#include "tests/golden.h"

static struct gemma3_config cfg_1b(void)
{
	/* Gemma 3 1B's attention shape: 26 layers, every sixth global */
	struct gemma3_config c = { .n_layer = 26, .n_head_kv = 1, .head_dim = 256, .sliding_window = 512 };
	for (uint32_t i = 0; i < c.n_layer; i++)
		c.layer_global[i] = i % 6 == 5;
	return c;
}

Test(kvpaged, plan_full_and_budget)
{
	struct gemma3_config c = cfg_1b();
	struct kv_layout l;
	cr_assert_eq(kv_layout_plan(&c, 4096, 4, 0, KV_TYPE_F32, &l), 0, "%s", err_msg());
	cr_assert_eq(l.block, 16u);
	cr_assert_eq(l.max_blocks, 256u);
	cr_assert_eq(l.n_global, 4u);
	cr_assert_eq(l.n_local, 22u);
	/* window 512 + a 256-position step, in blocks, + 1 */
	cr_assert_eq(l.ring, (512u + 256 + 15) / 16 + 1);
	cr_assert_eq(l.gblock_bytes, 2ull * 256 * 4 * 16 * 4);
	cr_assert_eq(l.lblock_bytes, 2ull * 256 * 4 * 16 * 22);
	cr_assert_eq(l.n_gblocks, 4u * 256);
	cr_assert_eq(l.n_lblocks, 4u * l.ring);
	cr_assert_eq(l.bytes, l.n_gblocks * l.gblock_bytes + l.n_lblocks * l.lblock_bytes);
	/* the ring keeps a 4096-position sequence well under all-layers-global */
	uint64_t one = l.max_blocks * l.gblock_bytes + l.ring * l.lblock_bytes;
	cr_assert_lt(one * 3, 2ull * 256 * 4 * 26 * 4096, "paged local layers should save > 3x");

	/* a budget: within it, the local pool at most max_seqs rings */
	struct kv_layout b;
	cr_assert_eq(kv_layout_plan(&c, 4096, 8, 256ull << 20, KV_TYPE_F32, &b), 0, "%s", err_msg());
	cr_assert_leq(b.bytes, 256ull << 20);
	cr_assert_geq(b.n_gblocks, b.max_blocks);
	cr_assert_geq(b.n_lblocks, b.ring);
	cr_assert_leq(b.n_lblocks, 8 * b.ring);
	/* too small for one full sequence: a clear error */
	cr_assert_eq(kv_layout_plan(&c, 4096, 8, 1 << 20, KV_TYPE_F32, &b), ERR_RANGE);
	cr_assert(strstr(err_msg(), "--kv-budget"), "%s", err_msg());
	/* a long context splits the budget as for 4,096-position sequences: the
	 * same pools as at 4096, not rings for the few 32K-position sequences the
	 * budget would hold whole */
	struct kv_layout s4, s32;
	cr_assert_eq(kv_layout_plan(&c, 4096, 64, 1ull << 30, KV_TYPE_F16, &s4), 0, "%s", err_msg());
	cr_assert_eq(kv_layout_plan(&c, 32768, 64, 1ull << 30, KV_TYPE_F16, &s32), 0, "%s", err_msg());
	cr_assert_eq(s32.n_lblocks, s4.n_lblocks, "local pool at 32K %u, at 4K %u", s32.n_lblocks, s4.n_lblocks);
	uint64_t whole = (uint64_t)s32.max_blocks * s32.gblock_bytes + s32.ring * s32.lblock_bytes;
	cr_assert_gt(s32.n_lblocks, ((1ull << 30) / whole + 1) * s32.ring);
	cr_assert_leq(s32.bytes, 1ull << 30);
	/* a huge budget is capped at what max_seqs sequences can use */
	cr_assert_eq(kv_layout_plan(&c, 4096, 2, 1ull << 40, KV_TYPE_F32, &b), 0, "%s", err_msg());
	cr_assert_eq(b.n_gblocks, 2 * b.max_blocks);
	cr_assert_eq(b.n_lblocks, 2 * b.ring);
	/* no window layers: no ring */
	for (uint32_t i = 0; i < c.n_layer; i++)
		c.layer_global[i] = true;
	cr_assert_eq(kv_layout_plan(&c, 100, 1, 0, KV_TYPE_F32, &b), 0);
	cr_assert_eq(b.ring, 0u);
	cr_assert_eq(b.n_lblocks, 0u);
	cr_assert_eq(b.max_blocks, 7u);
	cr_assert_eq(kv_layout_plan(&c, 0, 1, 0, KV_TYPE_F32, &b), ERR_RANGE);
	cr_assert_eq(kv_layout_plan(&c, KV_MAX_CTX + 1, 1, 0, KV_TYPE_F32, &b), ERR_RANGE);
	cr_assert_eq(kv_layout_plan(&c, 64, 0, 0, KV_TYPE_F32, &b), ERR_RANGE);
	/* the longest context's table fits a slot's ATTACH_KV_TABLE */
	cr_assert_eq(kv_layout_plan(&c, KV_MAX_CTX, 1, 0, KV_TYPE_F32, &b), 0, "%s", err_msg());
	cr_assert_leq(kv_table_len(&b), KV_MAX_TABLE);
}

Test(kvpaged, parse_bytes)
{
	uint64_t v;
	cr_assert_eq(kv_parse_bytes("2G", &v), 0);
	cr_assert_eq(v, 2ull << 30);
	cr_assert_eq(kv_parse_bytes("512MiB", &v), 0);
	cr_assert_eq(v, 512ull << 20);
	cr_assert_eq(kv_parse_bytes("1000", &v), 0);
	cr_assert_eq(v, 1000u);
	cr_assert_eq(kv_parse_bytes("auto", &v), 0);
	cr_assert_eq(v, 0u);
	const char *bad[] = { "", "G", "-1", "0", "12X", "3GG", "99999999999999999999", "17179869184G" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_eq(kv_parse_bytes(bad[i], &v), ERR_INVAL, "'%s' accepted", bad[i]);
}

/* Max |a - b| over max |b|: the logits of one position. */
static double rel_err(const float *a, const float *b, size_t n)
{
	double d = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		if (isinf(b[i]) && a[i] == b[i])
			continue;
		double e = fabs((double)a[i] - b[i]);
		d = e > d ? e : d;
		m = fabs(b[i]) > m ? fabs(b[i]) : m;
	}
	return d / (m > 0 ? m : 1);
}

/* Two sequences on a small pool with scattered tables: A runs 320 positions
 * (its sliding-window ring of 18 blocks wraps at 288), B shares A's first 64
 * positions' blocks (global and ring) and runs only 64..199 itself. Logits at
 * chosen positions match the CPU reference of each one's full token stream. */
Test(kvpaged, scattered_shared_and_ring_match_reference, .timeout = 240)
{
	struct golden g;
	struct model *m;
	cr_assert_eq(golden_load("f32", &g), 0, "%s", err_msg());
	cr_assert_eq(model_open(g.model_path, &m), 0, "%s", err_msg());
	enum { NA = 320, NB = 200, SHARED = 64, CH = 32 };
	struct kv_layout l;
	/* budget for 1.8 full sequences: the pools are smaller than 2 x full */
	cr_assert_eq(kv_layout_plan(&m->cfg, 512, 2, 0, KV_TYPE_F32, &l), 0, "%s", err_msg());
	uint64_t full = (uint64_t)l.max_blocks * l.gblock_bytes + (uint64_t)l.ring * l.lblock_bytes;
	cr_assert_eq(kv_layout_plan(&m->cfg, 512, 2, full * 9 / 5, KV_TYPE_F32, &l), 0, "%s", err_msg());
	cr_assert_eq(l.ring, 18u, "window 8 + 256 slack");
	cr_assert_lt(l.n_gblocks, 2 * l.max_blocks);
	struct engine_opts o = { .max_batch = CH, .n_split = 4, .max_seqs = 2, .kv = &l };
	struct engine *e;
	cr_assert_eq(engine_create(m, &o, &e), 0, "%s", err_msg());
	uint32_t tl = kv_table_len(&l);
	cr_assert_eq(tl, l.max_blocks + l.ring);
	uint32_t *ta = calloc(tl, 4), *tb = calloc(tl, 4);
	/* A's global blocks from the top of the pool down; B shares A's first
	 * SHARED/16 and takes the ones A leaves free from the bottom up */
	uint32_t na = (NA + 15) / 16, nb = (NB + 15) / 16, ns = SHARED / 16;
	cr_assert_leq(na + nb - ns, l.n_gblocks);
	for (uint32_t b = 0; b < na; b++)
		ta[b] = l.n_gblocks - 1 - b;
	for (uint32_t b = 0; b < nb; b++)
		tb[b] = b < ns ? ta[b] : b - ns;
	/* rings: A odd-then-even, B shares the ring entries of the prefix blocks */
	cr_assert_geq(l.n_lblocks, 2 * l.ring - ns);
	for (uint32_t j = 0; j < l.ring; j++)
		ta[l.max_blocks + j] = (j * 7) % l.ring;          /* a permutation of 0..ring-1 */
	for (uint32_t j = 0; j < l.ring; j++)
		tb[l.max_blocks + j] = j < ns ? ta[l.max_blocks + j] : l.ring + j - ns;
	cr_assert_eq(engine_seq_blocks(e, 0, ta, tl), 0, "%s", err_msg());
	cr_assert_eq(engine_seq_blocks(e, 1, tb, tl), 0, "%s", err_msg());
	/* hostile tables are refused whole */
	uint32_t keep = tb[3];
	tb[3] = l.n_gblocks;
	cr_assert_eq(engine_seq_blocks(e, 1, tb, tl), ERR_RANGE);
	tb[3] = keep;
	tb[l.max_blocks] = l.n_lblocks;
	cr_assert_eq(engine_seq_blocks(e, 1, tb, tl), ERR_RANGE);
	tb[l.max_blocks] = ta[l.max_blocks];
	cr_assert_eq(engine_seq_blocks(e, 1, tb, tl - 1), ERR_INVAL);
	cr_assert_eq(engine_seq_blocks(e, 2, tb, tl), ERR_RANGE);

	uint32_t *toka = malloc(NA * 4), *tokb = malloc(NB * 4);
	for (uint32_t i = 0; i < NA; i++)
		toka[i] = g.tokens[(i * 7 + i / 13) % g.n_tokens];
	for (uint32_t i = 0; i < NB; i++)
		tokb[i] = i < SHARED ? toka[i] : g.tokens[(i * 5 + 3) % g.n_tokens];
	size_t V = g.n_vocab;
	float *lga = malloc((size_t)NA * V * 4), *lgb = malloc((size_t)NB * V * 4);
	/* interleave A's and B's chunks; B starts once A has written the prefix */
	for (uint32_t p = 0; p < NA; p += CH) {
		cr_assert_eq(engine_seq_select(e, 0), 0);
		cr_assert_eq(engine_forward(e, toka + p, CH, p, lga + (size_t)p * V, true), 0, "%s", err_msg());
		uint32_t q = p; /* B's chunk at the same offset, from SHARED on */
		if (q >= SHARED && q < NB) {
			uint32_t n = NB - q < CH ? NB - q : CH;
			cr_assert_eq(engine_seq_select(e, 1), 0);
			cr_assert_eq(engine_forward(e, tokb + q, n, q, lgb + (size_t)q * V, true), 0, "%s", err_msg());
		}
	}
	engine_destroy(e);

	struct ref_model *r;
	float *want = malloc(V * 4);
	const uint32_t checks_a[] = { 0, 63, 100, 287, 288, 300, 319 }, checks_b[] = { 64, 65, 150, 199 };
	for (int s = 0; s < 2; s++) {
		cr_assert_eq(ref_create(m, 512, &r), 0, "%s", err_msg());
		const uint32_t *chk = s ? checks_b : checks_a;
		size_t nchk = s ? 4 : 7, k = 0;
		uint32_t n = s ? NB : NA;
		for (uint32_t p = 0; p < n && k < nchk; p++) {
			cr_assert_eq(ref_forward(r, (s ? tokb : toka)[p], p, want), 0, "%s", err_msg());
			if (p != chk[k])
				continue;
			double d = rel_err((s ? lgb : lga) + (size_t)p * V, want, V);
			cr_assert_lt(d, 1e-3, "sequence %c position %u: rel err %.3e", s ? 'B' : 'A', p, d);
			k++;
		}
		cr_assert_eq(k, nchk);
		ref_destroy(r);
	}
	free(want); free(lga); free(lgb); free(toka); free(tokb); free(ta); free(tb);
	model_close(m);
	golden_free(&g);
}

/* A worker-sized step (max_batch) beyond the ring's slack is refused for an
 * external layout; the lone-engine layout widens its ring instead. */
Test(kvpaged, engine_checks_layout, .timeout = 60)
{
	struct golden g;
	struct model *m;
	cr_assert_eq(golden_load("q4_0", &g), 0, "%s", err_msg());
	cr_assert_eq(model_open(g.model_path, &m), 0, "%s", err_msg());
	struct kv_layout l;
	cr_assert_eq(kv_layout_plan(&m->cfg, 128, 1, 0, KV_TYPE_F32, &l), 0);
	struct engine *e = NULL;
	struct engine_opts o = { .max_batch = KV_RING_SLACK + 1, .kv = &l };
	cr_assert_eq(engine_create(m, &o, &e), ERR_INVAL);
	o.kv = NULL;
	o.max_ctx = 1024;
	cr_assert_eq(engine_create(m, &o, &e), 0, "%s", err_msg());
	cr_assert_eq(engine_kv_layout(e)->ring, engine_kv_layout(e)->max_blocks);
	engine_destroy(e);
	model_close(m);
	golden_free(&g);
}
