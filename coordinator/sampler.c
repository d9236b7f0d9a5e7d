/* sampler: penalties, then greedy / temperature + top-k + top-p + min-p over
 * the head's candidates. */
#include "coordinator/sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/err.h"

int sampler_check(const struct sampler_params *p)
{
	if (!p)
		return err_set(ERR_INVAL, "sampler: params: NULL");
	if (!isfinite(p->temperature) || p->temperature < 0.0f || p->temperature > 100.0f)
		return err_set(ERR_INVAL, "sampler: temperature: %g not in [0, 100]",
			       (double)p->temperature);
	if (p->top_k > SAMPLER_MAX_K)
		return err_set(ERR_INVAL, "sampler: top_k: %u > %d", p->top_k, SAMPLER_MAX_K);
	if (!isfinite(p->top_p) || p->top_p <= 0.0f || p->top_p > 1.0f)
		return err_set(ERR_INVAL, "sampler: top_p: %g not in (0, 1]", (double)p->top_p);
	if (!isfinite(p->min_p) || p->min_p < 0.0f || p->min_p > 1.0f)
		return err_set(ERR_INVAL, "sampler: min_p: %g not in [0, 1]", (double)p->min_p);
	if (!isfinite(p->repetition_penalty) || p->repetition_penalty < 0.0f ||
	    p->repetition_penalty > 100.0f)
		return err_set(ERR_INVAL, "sampler: repetition_penalty: %g not in (0, 100] "
			       "(0 = off)", (double)p->repetition_penalty);
	if (!isfinite(p->presence_penalty) || fabsf(p->presence_penalty) > 2.0f)
		return err_set(ERR_INVAL, "sampler: presence_penalty: %g not in [-2, 2]",
			       (double)p->presence_penalty);
	if (!isfinite(p->frequency_penalty) || fabsf(p->frequency_penalty) > 2.0f)
		return err_set(ERR_INVAL, "sampler: frequency_penalty: %g not in [-2, 2]",
			       (double)p->frequency_penalty);
	return 0;
}

static bool rep_on(const struct sampler_params *p)
{
	return p->repetition_penalty != 0.0f && p->repetition_penalty != 1.0f;
}

bool sampler_has_penalty(const struct sampler_params *p)
{
	return rep_on(p) || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
}

bool sampler_wants_topk(const struct sampler_params *p)
{
	return p->temperature > 0.0f || sampler_has_penalty(p);
}

/* splitmix64: a strong 64-bit mix, so nearby (seed, step) pairs are unrelated. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

double sampler_uniform(uint64_t seed, uint32_t step)
{
	uint64_t r = mix64(mix64(seed) ^ ((uint64_t)step * 0xD1B54A32D192ED03ull + 1));
	return (double)(r >> 11) * (1.0 / 9007199254740992.0); /* 53 bits */
}

struct cand {
	uint32_t id;
	float logit;
};

/* Order: finite before non-finite, logit descending, id ascending. Total, so
 * qsort's instability cannot change the result. */
static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	int fx = isfinite(x->logit) || x->logit > 0, fy = isfinite(y->logit) || y->logit > 0;
	if (fx != fy)
		return fy - fx;
	if (x->logit > y->logit)
		return -1;
	if (x->logit < y->logit)
		return 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Candidate positions sorted by id, for finding history tokens among them. */
struct by_id {
	uint32_t id, pos;
};

static int by_id_cmp(const void *a, const void *b)
{
	const struct by_id *x = a, *y = b;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* First index in s[n] with id >= t (n when none). */
static uint32_t lower(const struct by_id *s, uint32_t n, uint32_t t)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s[mid].id < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Count the occurrences of every candidate in toks[n] into cnt[pos]
 * (saturating; binary search per token: O(n log k)). */
static void count_in(const struct by_id *s, uint32_t k, const uint32_t *toks, uint32_t n,
		     uint32_t *cnt)
{
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = lower(s, k, toks[i]); j < k && s[j].id == toks[i]; j++)
			if (cnt[s[j].pos] < UINT32_MAX)
				cnt[s[j].pos]++;
}

/* Step 1 of sampler.h: penalties on c[k] (unsorted) from the history. */
static void penalize(const struct sampler_params *p, struct cand *c, uint32_t k,
		     const struct sampler_hist *h)
{
	if (!h || !sampler_has_penalty(p))
		return;
	struct by_id s[SAMPLER_MAX_K];
	for (uint32_t i = 0; i < k; i++)
		s[i] = (struct by_id){ c[i].id, i };
	qsort(s, k, sizeof s[0], by_id_cmp);
	uint32_t in_seq[SAMPLER_MAX_K] = { 0 }, in_gen[SAMPLER_MAX_K] = { 0 };
	if (rep_on(p) && h->seq)
		count_in(s, k, h->seq, h->n_seq, in_seq);
	if ((p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f) && h->gen)
		count_in(s, k, h->gen, h->n_gen, in_gen);
	for (uint32_t i = 0; i < k; i++) {
		if (!isfinite(c[i].logit))
			continue; /* -inf stays unreachable; NaN was made -inf */
		double l = c[i].logit;
		if (in_seq[i])
			l = l > 0.0 ? l / p->repetition_penalty : l * p->repetition_penalty;
		if (in_gen[i])
			l -= (double)p->presence_penalty +
			     (double)p->frequency_penalty * (double)in_gen[i];
		c[i].logit = (float)l;
	}
}

int sampler_pick(const struct sampler_params *p, const uint32_t *ids, const float *logits,
		 uint32_t k, uint32_t step, uint32_t *out)
{
	return sampler_pick_hist(p, ids, logits, k, step, NULL, out);
}

int sampler_pick_hist(const struct sampler_params *p, const uint32_t *ids,
		      const float *logits, uint32_t k, uint32_t step,
		      const struct sampler_hist *h, uint32_t *out)
{
	int rc = sampler_check(p);
	if (rc)
		return rc;
	if (!ids || !logits || !out)
		return err_set(ERR_INVAL, "sampler: NULL argument");
	if (k < 1 || k > SAMPLER_MAX_K)
		return err_set(ERR_INVAL, "sampler: k: %u not in 1..%d", k, SAMPLER_MAX_K);
	struct cand c[SAMPLER_MAX_K];
	for (uint32_t i = 0; i < k; i++) {
		c[i].id = ids[i];
		/* NaN sorts last and is never drawn: treat it as -inf. */
		c[i].logit = isnan(logits[i]) ? -INFINITY : logits[i];
	}
	penalize(p, c, k, h);
	qsort(c, k, sizeof c[0], cand_cmp);
	if (p->temperature == 0.0f) {
		*out = c[0].id;
		return 0;
	}
	uint32_t n = p->top_k ? (p->top_k < k ? p->top_k : k) : k;
	if (!isfinite(c[0].logit)) {
		*out = c[0].id; /* nothing sensible to draw from */
		return 0;
	}
	double prob[SAMPLER_MAX_K], sum = 0.0;
	for (uint32_t i = 0; i < n; i++) {
		prob[i] = isfinite(c[i].logit)
			? exp(((double)c[i].logit - (double)c[0].logit) / (double)p->temperature)
			: 0.0;
		sum += prob[i];
	}
	/* top-p: smallest prefix (in sorted order) whose mass reaches top_p. */
	if (p->top_p < 1.0f) {
		double acc = 0.0, target = (double)p->top_p * sum;
		uint32_t keep = n;
		for (uint32_t i = 0; i < n; i++) {
			acc += prob[i];
			if (acc >= target) {
				keep = i + 1;
				break;
			}
		}
		n = keep;
		sum = 0.0;
		for (uint32_t i = 0; i < n; i++)
			sum += prob[i];
	}
	/* min-p: drop candidates below min_p times the most likely one's
	 * probability (prob[0] = 1 here: the logits are sorted and shifted by
	 * the largest). The most likely always stays. */
	if (p->min_p > 0.0f) {
		double floor = (double)p->min_p * prob[0];
		uint32_t keep = 1;
		while (keep < n && prob[keep] >= floor)
			keep++;
		n = keep;
		sum = 0.0;
		for (uint32_t i = 0; i < n; i++)
			sum += prob[i];
	}
	double u = sampler_uniform(p->seed, step) * sum, acc = 0.0;
	for (uint32_t i = 0; i < n; i++) {
		acc += prob[i];
		if (u < acc && prob[i] > 0.0) {
			*out = c[i].id;
			return 0;
		}
	}
	/* Rounding left u at the very top: the last candidate with mass. */
	for (uint32_t i = n; i-- > 0;)
		if (prob[i] > 0.0) {
			*out = c[i].id;
			return 0;
		}
	*out = c[0].id;
	return 0;
}
