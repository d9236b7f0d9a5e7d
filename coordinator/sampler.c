/* sampler: greedy / temperature + top-k + top-p over the head's candidates. */
#include "coordinator/sampler.h"

#include <math.h>
#include <stdlib.h>

#include "ipc/err.h"

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
	return 0;
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

int sampler_pick(const struct sampler_params *p, const uint32_t *ids, const float *logits,
		 uint32_t k, uint32_t step, uint32_t *out)
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
