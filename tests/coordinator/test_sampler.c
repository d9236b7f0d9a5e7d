/* Sampler tests: greedy ties, determinism per (seed, step), top-k / top-p cuts,
 * distribution of draws against the softmax. */
#include <criterion/criterion.h>
#include <math.h>

#include "coordinator/sampler.h"
#include "common/err.h"

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

/* --- penalties and min_p (fixed inputs, exact picks) ------------------------ */

Test(sampler, repetition_penalty_divides_positive_multiplies_negative)
{
	struct sampler_params p = { .temperature = 0.0f, .top_p = 1.0f, .repetition_penalty = 2.0f };
	uint32_t ids[3] = { 1, 2, 3 }, out = 0;
	float lg[3] = { 2.0f, 1.5f, -1.0f };
	uint32_t seq[4] = { 9, 1, 1, 1 }; /* repeated: the penalty applies once */
	struct sampler_hist h = { .seq = seq, .n_seq = 4 };
	/* 2.0 / 2 = 1.0 < 1.5 */
	cr_assert_eq(sampler_pick_hist(&p, ids, lg, 3, 0, &h, &out), 0);
	cr_assert_eq(out, 2);
	/* negative logits are multiplied: -1 * 2 = -2 < -1.5 */
	uint32_t ids2[2] = { 5, 6 };
	float lg2[2] = { -1.0f, -1.5f };
	uint32_t seq2[1] = { 5 };
	struct sampler_hist h2 = { .seq = seq2, .n_seq = 1 };
	cr_assert_eq(sampler_pick_hist(&p, ids2, lg2, 2, 0, &h2, &out), 0);
	cr_assert_eq(out, 6);
	/* 1.2: 2.0 / 1.2 = 1.667 > 1.5 keeps id 1 */
	p.repetition_penalty = 1.2f;
	cr_assert_eq(sampler_pick_hist(&p, ids, lg, 3, 0, &h, &out), 0);
	cr_assert_eq(out, 1);
	/* below 1 rewards repetition: -1 * 0.5 = -0.5 > -1.5... and over id 6 */
	p.repetition_penalty = 0.5f;
	cr_assert_eq(sampler_pick_hist(&p, ids2, lg2, 2, 0, &h2, &out), 0);
	cr_assert_eq(out, 5);
	/* the generated-only history does not count for repetition_penalty */
	p.repetition_penalty = 2.0f;
	struct sampler_hist g = { .gen = seq, .n_gen = 4 };
	cr_assert_eq(sampler_pick_hist(&p, ids, lg, 3, 0, &g, &out), 0);
	cr_assert_eq(out, 1);
}

Test(sampler, presence_frequency_openai_formula)
{
	uint32_t ids[3] = { 10, 11, 12 }, out = 0;
	float lg[3] = { 3.0f, 2.5f, 2.0f };
	uint32_t gen[4] = { 10, 10, 11, 77 }; /* 77 is no candidate: ignored */
	struct sampler_hist h = { .gen = gen, .n_gen = 4 };
	/* 10: 3 - 0.25 - 2*0.5 = 1.75; 11: 2.5 - 0.25 - 0.5 = 1.75; 12: 2.0 */
	struct sampler_params p = { .top_p = 1.0f, .presence_penalty = 0.25f,
				    .frequency_penalty = 0.5f };
	cr_assert_eq(sampler_pick_hist(&p, ids, lg, 3, 0, &h, &out), 0);
	cr_assert_eq(out, 12);
	/* frequency only, 0.25: 10: 2.5, 11: 2.25, 12: 2.0 */
	p = (struct sampler_params){ .top_p = 1.0f, .frequency_penalty = 0.25f };
	cr_assert_eq(sampler_pick_hist(&p, ids, lg, 3, 0, &h, &out), 0);
	cr_assert_eq(out, 10);
	/* presence only, 0.5: 10: 2.5, 11: 2.0 -> still 10; 0.75 + freq 0.25 ->
	 * 10: 1.75, 11: 1.5, 12: 2.0 */
	p = (struct sampler_params){ .top_p = 1.0f, .presence_penalty = 0.75f,
				    .frequency_penalty = 0.25f };
	cr_assert_eq(sampler_pick_hist(&p, ids, lg, 3, 0, &h, &out), 0);
	cr_assert_eq(out, 12);
	/* a tie after the penalty goes to the lowest id: gen {10}, presence 0.5 ->
	 * 10: 2.5 = 11: 2.5 */
	uint32_t g1[1] = { 10 };
	struct sampler_hist h1 = { .gen = g1, .n_gen = 1 };
	p = (struct sampler_params){ .top_p = 1.0f, .presence_penalty = 0.5f };
	cr_assert_eq(sampler_pick_hist(&p, ids, lg, 3, 0, &h1, &out), 0);
	cr_assert_eq(out, 10);
	/* negative presence promotes a used candidate: gen {11}: 11 -> 3.25 > 3.0 */
	uint32_t g2[1] = { 11 };
	struct sampler_hist h2 = { .gen = g2, .n_gen = 1 };
	p = (struct sampler_params){ .top_p = 1.0f, .presence_penalty = -0.75f };
	cr_assert_eq(sampler_pick_hist(&p, ids, lg, 3, 0, &h2, &out), 0);
	cr_assert_eq(out, 11);
}

Test(sampler, neutral_penalties_keep_exact_greedy)
{
	uint32_t gen[3] = { 7, 7, 13 };
	struct sampler_hist h = { .seq = gen, .n_seq = 3, .gen = gen, .n_gen = 3 };
	struct sampler_params p = { .top_p = 1.0f, .repetition_penalty = 1.0f };
	cr_assert_not(sampler_has_penalty(&p));
	cr_assert_not(sampler_wants_topk(&p));
	p.repetition_penalty = 0.0f; /* zero-initialised = off */
	cr_assert_not(sampler_has_penalty(&p));
	uint32_t out;
	cr_assert_eq(sampler_pick_hist(&p, ids8, lg8, 8, 0, &h, &out), 0);
	cr_assert_eq(out, 7);
	p.frequency_penalty = 0.5f;
	cr_assert(sampler_has_penalty(&p));
	cr_assert(sampler_wants_topk(&p));
	/* 7: 3.5 - 1.0 = 2.5; 13: 3.5 - 0.5 = 3.0 */
	cr_assert_eq(sampler_pick_hist(&p, ids8, lg8, 8, 0, &h, &out), 0);
	cr_assert_eq(out, 13);
	/* no history: nothing to penalize */
	cr_assert_eq(sampler_pick(&p, ids8, lg8, 8, 0, &out), 0);
	cr_assert_eq(out, 7);
}

Test(sampler, min_p_cuts_relative_to_top)
{
	/* probabilities with T=1: 0.5, 0.3, 0.15, 0.05 (relative 1, 0.6, 0.3, 0.1) */
	uint32_t ids[4] = { 10, 11, 12, 13 };
	float lg[4] = { logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f) };
	struct sampler_params p = { .temperature = 1.0f, .top_p = 1.0f, .min_p = 0.65f, .seed = 5 };
	for (uint32_t step = 0; step < 300; step++) {
		uint32_t out;
		cr_assert_eq(sampler_pick(&p, ids, lg, 4, step, &out), 0);
		cr_assert_eq(out, 10, "min_p 0.65 leaves only the top candidate");
	}
	p.min_p = 0.35f; /* keeps 1 and 0.6: 5:3 */
	int seen[4] = { 0 };
	for (uint32_t step = 0; step < 2000; step++) {
		uint32_t out;
		cr_assert_eq(sampler_pick(&p, ids, lg, 4, step, &out), 0);
		seen[out - 10]++;
	}
	cr_assert_eq(seen[2] + seen[3], 0);
	cr_assert(fabs(seen[0] / 2000.0 - 0.625) < 0.04);
	/* min_p applies after the temperature: T = 2 makes the relative
	 * probabilities sqrt(0.6) = 0.775, sqrt(0.3) = 0.548, sqrt(0.1) = 0.316,
	 * so 0.5 now keeps three */
	p.temperature = 2.0f;
	p.min_p = 0.5f;
	int third = 0;
	for (uint32_t step = 0; step < 2000; step++) {
		uint32_t out;
		cr_assert_eq(sampler_pick(&p, ids, lg, 4, step, &out), 0);
		cr_assert_neq(out, 13);
		third += out == 12;
	}
	cr_assert_gt(third, 100);
}

/* The draw with penalties equals an independent computation of the
 * penalized softmax and the (seed, step) uniform. */
Test(sampler, penalized_draw_matches_manual)
{
	uint32_t ids[4] = { 20, 21, 22, 23 };
	float lg[4] = { 1.0f, 0.5f, -0.5f, 0.25f };
	uint32_t seq[3] = { 20, 22, 21 }, gen[2] = { 22, 21 };
	struct sampler_hist h = { .seq = seq, .n_seq = 3, .gen = gen, .n_gen = 2 };
	struct sampler_params p = { .temperature = 0.7f, .top_p = 1.0f, .seed = 99,
				    .repetition_penalty = 1.5f, .presence_penalty = 0.5f,
				    .frequency_penalty = 0.25f };
	/* 20: 1/1.5; 21: 0.5/1.5 - 0.75; 22: -0.5*1.5 - 0.75; 23: 0.25 */
	double pl[4] = { 1.0 / 1.5, 0.5 / 1.5 - 0.75, -0.75 - 0.75, 0.25 };
	/* sorted order: 20, 23, 21, 22 */
	int order[4] = { 0, 3, 1, 2 };
	int hits = 0;
	for (uint32_t step = 0; step < 200; step++) {
		double pr[4], sum = 0;
		for (int i = 0; i < 4; i++) {
			pr[i] = exp((pl[order[i]] - pl[0]) / 0.7);
			sum += pr[i];
		}
		double u = sampler_uniform(99, step) * sum, acc = 0;
		uint32_t want = ids[order[3]];
		for (int i = 0; i < 4; i++) {
			acc += pr[i];
			if (u < acc) {
				want = ids[order[i]];
				break;
			}
		}
		uint32_t out, again;
		cr_assert_eq(sampler_pick_hist(&p, ids, lg, 4, step, &h, &out), 0);
		cr_assert_eq(sampler_pick_hist(&p, ids, lg, 4, step, &h, &again), 0);
		cr_assert_eq(out, again);
		cr_assert_eq(out, want, "step %u: got %u, expected %u", step, out, want);
		hits += out == 22;
	}
	cr_assert_gt(hits, 0); /* the least likely still appears */
}

Test(sampler, rejects_bad_penalties)
{
	uint32_t out;
	struct sampler_params p = { .top_p = 1.0f, .min_p = 1.5f };
	cr_assert_eq(sampler_pick(&p, ids8, lg8, 8, 0, &out), ERR_INVAL);
	p = (struct sampler_params){ .top_p = 1.0f, .min_p = -0.1f };
	cr_assert_eq(sampler_check(&p), ERR_INVAL);
	p = (struct sampler_params){ .top_p = 1.0f, .presence_penalty = 2.5f };
	cr_assert_eq(sampler_check(&p), ERR_INVAL);
	p = (struct sampler_params){ .top_p = 1.0f, .frequency_penalty = -2.01f };
	cr_assert_eq(sampler_check(&p), ERR_INVAL);
	p = (struct sampler_params){ .top_p = 1.0f, .repetition_penalty = -1.0f };
	cr_assert_eq(sampler_check(&p), ERR_INVAL);
	p = (struct sampler_params){ .top_p = 1.0f, .repetition_penalty = NAN };
	cr_assert_eq(sampler_check(&p), ERR_INVAL);
	p = (struct sampler_params){ .top_p = 1.0f, .presence_penalty = -2.0f,
				     .frequency_penalty = 2.0f, .min_p = 1.0f,
				     .repetition_penalty = 1.3f };
	cr_assert_eq(sampler_check(&p), 0);
}
