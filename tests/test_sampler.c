/* Sampler tests: greedy ties, determinism per (seed, step), top-k / top-p cuts,
 * distribution of draws against the softmax. */
#include <criterion/criterion.h>
#include <math.h>

#include "coordinator/sampler.h"
#include "ipc/err.h"

static const uint32_t ids8[8] = { 40, 7, 13, 99, 5, 61, 2, 30 };
static const float lg8[8] = { 1.0f, 3.5f, 3.5f, -2.0f, 0.5f, 2.0f, -1.0f, 0.0f };

Test(sampler, greedy_ties_lowest_id)
{
	struct sampler_params p = { .temperature = 0.0f, .top_p = 1.0f };
	uint32_t out = 0;
	cr_assert_eq(sampler_pick(&p, ids8, lg8, 8, 0, &out), 0);
	cr_assert_eq(out, 7); /* ids 7 and 13 both have 3.5 */
	uint32_t ids2[2] = { 13, 7 };
	float lg2[2] = { 3.5f, 3.5f };
	cr_assert_eq(sampler_pick(&p, ids2, lg2, 2, 5, &out), 0);
	cr_assert_eq(out, 7);
}

Test(sampler, greedy_ignores_nan)
{
	struct sampler_params p = { .temperature = 0.0f, .top_p = 1.0f };
	uint32_t ids[3] = { 1, 2, 3 };
	float lg[3] = { NAN, 1.0f, 0.5f };
	uint32_t out;
	cr_assert_eq(sampler_pick(&p, ids, lg, 3, 0, &out), 0);
	cr_assert_eq(out, 2);
}

Test(sampler, top_k_one_is_greedy)
{
	struct sampler_params p = { .temperature = 2.0f, .top_k = 1, .top_p = 1.0f, .seed = 9 };
	for (uint32_t step = 0; step < 50; step++) {
		uint32_t out;
		cr_assert_eq(sampler_pick(&p, ids8, lg8, 8, step, &out), 0);
		cr_assert_eq(out, 7);
	}
}

Test(sampler, same_seed_same_tokens)
{
	struct sampler_params p = { .temperature = 1.0f, .top_p = 1.0f, .seed = 1234 };
	struct sampler_params q = p;
	q.seed = 1235;
	int differ = 0;
	for (uint32_t step = 0; step < 64; step++) {
		uint32_t a, b, c2;
		cr_assert_eq(sampler_pick(&p, ids8, lg8, 8, step, &a), 0);
		cr_assert_eq(sampler_pick(&p, ids8, lg8, 8, step, &b), 0);
		cr_assert_eq(a, b, "step %u: same seed gave %u and %u", step, a, b);
		cr_assert_eq(sampler_pick(&q, ids8, lg8, 8, step, &c2), 0);
		differ += a != c2;
	}
	cr_assert_gt(differ, 5, "another seed should draw differently");
	/* the draw depends on (seed, step) only: the order of the candidates does not matter */
	uint32_t rid[8], a, b;
	float rlg[8];
	for (int i = 0; i < 8; i++) {
		rid[i] = ids8[7 - i];
		rlg[i] = lg8[7 - i];
	}
	for (uint32_t step = 0; step < 32; step++) {
		sampler_pick(&p, ids8, lg8, 8, step, &a);
		sampler_pick(&p, rid, rlg, 8, step, &b);
		cr_assert_eq(a, b);
	}
}

Test(sampler, top_p_cuts_tail)
{
	/* probabilities with T=1: logits ln(0.5), ln(0.3), ln(0.15), ln(0.05) */
	uint32_t ids[4] = { 10, 11, 12, 13 };
	float lg[4] = { logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f) };
	struct sampler_params p = { .temperature = 1.0f, .top_p = 0.75f, .seed = 3 };
	int seen[4] = { 0 };
	for (uint32_t step = 0; step < 2000; step++) {
		uint32_t out;
		cr_assert_eq(sampler_pick(&p, ids, lg, 4, step, &out), 0);
		cr_assert(out >= 10 && out <= 13);
		seen[out - 10]++;
	}
	/* mass 0.5 + 0.3 = 0.8 >= 0.75: only the first two remain, 5:3 */
	cr_assert_eq(seen[2] + seen[3], 0);
	double f = seen[0] / 2000.0;
	cr_assert(fabs(f - 0.625) < 0.04, "frequency %.3f, expected 0.625", f);
}

Test(sampler, distribution_follows_softmax)
{
	uint32_t ids[3] = { 1, 2, 3 };
	float lg[3] = { 0.0f, logf(2.0f), logf(5.0f) }; /* probs 1/8, 2/8, 5/8 */
	struct sampler_params p = { .temperature = 1.0f, .top_p = 1.0f, .seed = 77 };
	int seen[3] = { 0 };
	for (uint32_t step = 0; step < 4000; step++) {
		uint32_t out;
		sampler_pick(&p, ids, lg, 3, step, &out);
		seen[out - 1]++;
	}
	cr_assert(fabs(seen[0] / 4000.0 - 0.125) < 0.03);
	cr_assert(fabs(seen[1] / 4000.0 - 0.25) < 0.03);
	cr_assert(fabs(seen[2] / 4000.0 - 0.625) < 0.03);
	/* top_k 2 drops id 1 */
	p.top_k = 2;
	for (uint32_t step = 0; step < 500; step++) {
		uint32_t out;
		sampler_pick(&p, ids, lg, 3, step, &out);
		cr_assert_neq(out, 1);
	}
}

Test(sampler, rejects_bad_params)
{
	uint32_t out;
	struct sampler_params p = { .temperature = -1.0f, .top_p = 1.0f };
	cr_assert_eq(sampler_pick(&p, ids8, lg8, 8, 0, &out), ERR_INVAL);
	p = (struct sampler_params){ .temperature = 1.0f, .top_p = 0.0f };
	cr_assert_eq(sampler_pick(&p, ids8, lg8, 8, 0, &out), ERR_INVAL);
	p = (struct sampler_params){ .temperature = 1.0f, .top_p = 1.0f, .top_k = 65 };
	cr_assert_eq(sampler_pick(&p, ids8, lg8, 8, 0, &out), ERR_INVAL);
	p = (struct sampler_params){ .temperature = 1.0f, .top_p = 1.0f };
	cr_assert_eq(sampler_pick(&p, ids8, lg8, 0, 0, &out), ERR_INVAL);
	cr_assert_eq(sampler_pick(&p, ids8, lg8, 65, 0, &out), ERR_INVAL);
}

Test(sampler, uniform_in_range)
{
	double sum = 0;
	for (uint32_t i = 0; i < 10000; i++) {
		double u = sampler_uniform(42, i);
		cr_assert(u >= 0.0 && u < 1.0);
		sum += u;
	}
	cr_assert(fabs(sum / 10000 - 0.5) < 0.02);
	cr_assert(sampler_uniform(1, 0) != sampler_uniform(2, 0));
	cr_assert(sampler_uniform(1, 0) != sampler_uniform(1, 1));
}
