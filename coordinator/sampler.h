/* sampler: pick the next token from the head's top-k candidates.
 *
 * The gpu worker's head writes up to MSG_MAX_TOPK (id, logit) pairs into the
 * slot's head area; the sampler works only from those. Greedy (temperature 0)
 * is an exact argmax with ties going to the lowest id. Otherwise the
 * candidates are sorted (logit desc, id asc), cut to top_k (0 = all), turned
 * into probabilities with softmax(logit / temperature), cut to the smallest
 * prefix whose mass reaches top_p, and one is drawn with a uniform number that
 * depends only on (seed, step): a replayed or resumed sequence draws exactly
 * the same tokens. */
#ifndef UNICORN_SAMPLER_H
#define UNICORN_SAMPLER_H

#include <stdint.h>

#define SAMPLER_MAX_K 64

struct sampler_params {
	float temperature;  /* 0 = greedy; (0, 100] */
	uint32_t top_k;     /* 0 = every candidate the head gave */
	float top_p;        /* (0, 1]; 1 = off */
	uint64_t seed;
};

/* Check the parameters (ERR_INVAL naming the field). */
int sampler_check(const struct sampler_params *p);

/* Uniform double in [0, 1) determined by (seed, step) alone. */
double sampler_uniform(uint64_t seed, uint32_t step);

/* Pick from k candidates (1..SAMPLER_MAX_K) ids[]/logits[] (any order) for
 * generated-token index step. Non-finite logits are never chosen unless all
 * are. *out = chosen id. */
int sampler_pick(const struct sampler_params *p, const uint32_t *ids, const float *logits,
		 uint32_t k, uint32_t step, uint32_t *out);

#endif
