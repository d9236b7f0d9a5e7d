/* The top-k head kernel (shaders/topk.comp) at Gemma 3's real vocabulary of
 * 262,144 ids, against a CPU top-k and log-sum-exp: the ranks, their values,
 * ties to the lower index, and rows of a batch at a stride (issue 35: on
 * lavapipe the sampling head returned garbage ids at this size). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_worker/engine.h"
#include "gpu_worker/vk.h"
#include "common/err.h"

static struct vk_ctx *vk;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void setup(void) { cr_assert_eq(vk_create(NULL, &vk), 0, "vk_create: %s", err_msg()); }
static void teardown(void) { vk_destroy(vk); }

static struct vk_buf *buf_from(const void *data, size_t n)
{
	struct vk_buf *b;
	cr_assert_eq(vk_buf_create(vk, VK_BUF_DEVICE, n, &b), 0, "%s", err_msg());
	if (data)
		cr_assert_eq(vk_upload(vk, b, 0, data, n), 0, "%s", err_msg());
	return b;
}

static void run1(const struct vk_pipe *p, struct vk_buf **bufs, const void *push, uint32_t gx, uint32_t gy, uint32_t gz)
{
	struct vk_bind b[VK_MAX_BINDINGS] = { 0 };
	for (uint32_t i = 0; i < p->n_bindings; i++)
		b[i].buf = bufs[i];
	VkDescriptorSet s;
	cr_assert_eq(vk_set_create(vk, p, b, &s), 0, "%s", err_msg());
	VkCommandBuffer cb;
	cr_assert_eq(vk_cmd_alloc(vk, &cb), 0);
	cr_assert_eq(vk_cmd_begin(cb, true), 0);
	vk_cmd_dispatch(cb, p, s, push, gx, gy, gz);
	vk_cmd_barrier(cb);
	vkEndCommandBuffer(cb);
	cr_assert_eq(vk_submit_wait(vk, cb), 0, "%s", err_msg());
	vk_cmd_free(vk, cb);
}

static int better(float v, uint32_t i, float w, uint32_t j) { return v > w || (v == w && i < j); }

/* rows of n logits stride apart; k of each row against the CPU */
/* kind 0: uniform in [-4, 4); 1: peaked near -11 (as the demo model's
 * logits); 2: ascending, every logit a new best (the most insertion work) */
static void check_topk(uint32_t n, uint32_t stride, uint32_t rows, uint32_t k, int kind)
{
	size_t total = (size_t)stride * rows;
	float *lg = malloc(total * 4);
	cr_assert(lg);
	for (size_t i = 0; i < total; i++)
		lg[i] = kind == 2 ? (float)(i % stride) * 1e-5f - 4.0f : kind == 1 ? frand() * 0.25f - 11.0f : frand() * 4;
	for (uint32_t r = 0; r < rows; r++) {
		float *row = lg + (size_t)r * stride;
		/* ties across the whole row (the lower index wins), the best at the
		 * very end, a masked -inf, and a near-miss value */
		row[n - 1] = 9.0f;
		row[5] = row[n - 7] = 8.5f;
		row[n / 2] = -INFINITY;
		row[3 * n / 4] = 8.4999995f;
	}
	struct vk_pipe pt;
	uint32_t wg32[1] = { 32 };
	cr_assert_eq(vk_pipe_create(vk, "topk", 4, sizeof(struct argmax_push), wg32, 1, &pt), 0, "%s", err_msg());
	uint32_t step[4] = { 0, 1, k, 0 };
	uint32_t lse_off = rows * 128;
	struct vk_buf *bl = buf_from(lg, total * 4), *br = buf_from(NULL, (lse_off + rows) * 4),
		      *bs = buf_from(step, sizeof step);
	struct argmax_push ap = { n, 0, stride, lse_off };
	uint32_t G = engine_tk_groups(n);
	struct vk_buf *bp = buf_from(NULL, ((size_t)ENGINE_TK_PART + (size_t)rows * G * ENGINE_TK_REC) * 4);
	cr_assert_eq(vk_fill_zero(vk, bp), 0);
	/* twice: the row counters must be back at zero after a dispatch */
	for (int rep = 0; rep < 2; rep++)
		run1(&pt, (struct vk_buf *[]){ bl, br, bs, bp }, &ap, G, rows, 1);
	vk_buf_destroy(vk, bp);
	uint32_t *res = malloc((lse_off + rows) * 4);
	vk_download(vk, br, 0, res, (lse_off + rows) * 4);
	uint32_t *ids = malloc(k * 4);
	float *vals = malloc(k * 4);
	for (uint32_t r = 0; r < rows; r++) {
		const float *row = lg + (size_t)r * stride;
		uint32_t have = 0;
		double mx = -INFINITY, sum = 0;
		for (uint32_t i = 0; i < n; i++)
			if (row[i] > mx)
				mx = row[i];
		for (uint32_t i = 0; i < n; i++) {
			float v = row[i];
			if (!(v > -INFINITY))
				continue;
			sum += exp(v - mx);
			if (have == k && !better(v, i, vals[k - 1], ids[k - 1]))
				continue;
			uint32_t j = have < k ? have++ : k - 1;
			while (j > 0 && better(v, i, vals[j - 1], ids[j - 1])) {
				vals[j] = vals[j - 1];
				ids[j] = ids[j - 1];
				j--;
			}
			vals[j] = v;
			ids[j] = i;
		}
		const uint32_t *rr = res + r * 128;
		for (uint32_t i = 0; i < k; i++) {
			float gv;
			memcpy(&gv, &rr[2 * i + 1], 4);
			cr_assert_eq(rr[2 * i], ids[i], "n %u row %u rank %u: id %u (%g), want %u (%g)", n, r, i, rr[2 * i],
				     gv, ids[i], vals[i]);
			cr_assert_eq(gv, vals[i], "n %u row %u rank %u: value %g, want %g", n, r, i, gv, vals[i]);
		}
		float lse;
		memcpy(&lse, &res[lse_off + r], 4);
		double want = mx + log(sum);
		cr_assert(fabs(lse - want) <= 1e-4 * fabs(want) + 1e-4, "n %u row %u: lse %g, want %g", n, r, lse, want);
	}
	vk_buf_destroy(vk, bl);
	vk_buf_destroy(vk, br);
	vk_buf_destroy(vk, bs);
	vk_pipe_destroy(vk, &pt);
	free(res);
	free(ids);
	free(vals);
	free(lg);
}

TestSuite(topk_vocab, .init = setup, .fini = teardown, .timeout = 120);

Test(topk_vocab, gemma3_vocab_k64) { check_topk(262144, 262144, 1, 64, 0); }
Test(topk_vocab, gemma3_vocab_peaked) { check_topk(262144, 262144, 1, 40, 1); }
Test(topk_vocab, gemma3_vocab_rows) { check_topk(262144, 262208, 3, 64, 1); }
Test(topk_vocab, gemma3_vocab_ascending) { check_topk(262144, 262144, 1, 64, 2); }
Test(topk_vocab, million_vocab_ascending) { check_topk(1u << 20, 1u << 20, 1, 64, 2); }
Test(topk_vocab, odd_vocab_rows) { check_topk(151937, 151941, 2, 33, 0); }
Test(topk_vocab, small_vocab_k1) { check_topk(32000, 32000, 2, 1, 0); }
