/* sampler: pick the next token from the head's top-k candidates.
 *
 * The gpu worker's head writes up to MSG_MAX_TOPK (id, logit) pairs into the
 * slot's head area; the sampler works only from those. Order of operations:
 *
 *   1. penalties on the candidates' logits (only when one is set):
 *      repetition_penalty (HF / llama.cpp): a candidate that occurs anywhere
 *        in the sequence so far (prompt and generated) gets logit / rp when
 *        its logit is > 0, logit * rp otherwise;
 *      presence_penalty, frequency_penalty (OpenAI): logit -=
 *        presence * (count > 0) + frequency * count, count = occurrences of
 *        the candidate among the generated tokens.
 *      Tokens outside the candidates cannot be promoted (a negative penalty
 *      only raises candidates).
 *   2. greedy (temperature 0): exact argmax, ties to the lowest id. With no
 *      penalty this is the head's argmax, bit-identical to before.
 *   3. otherwise the candidates are sorted (logit desc, id asc), cut to top_k
 *      (0 = all), turned into probabilities softmax(logit / temperature), cut
 *      to the smallest prefix whose mass reaches top_p, then min_p drops
 *      candidates whose probability is below min_p * (the largest), and one
 *      is drawn with a uniform number that depends only on (seed, step): a
 *      replayed or resumed sequence draws exactly the same tokens.
 *
 * A zero-initialised struct sampler_params (plus top_p = 1) is the plain
 * sampler: repetition_penalty 0 means off, the same as 1. */
#ifndef UNICORN_SAMPLER_H
#define UNICORN_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#define SAMPLER_MAX_K 64

struct sampler_params {
	float temperature;  /* 0 = greedy; (0, 100] */
	uint32_t top_k;     /* 0 = every candidate the head gave */
	float top_p;        /* (0, 1]; 1 = off */
	uint64_t seed;
	float min_p;              /* [0, 1]; 0 = off */
	float repetition_penalty; /* 0 or 1 = off; else (0, 100] */
	float presence_penalty;   /* [-2, 2]; 0 = off */
	float frequency_penalty;  /* [-2, 2]; 0 = off */
};

/* The tokens the penalties look at. seq: the whole sequence so far (prompt
 * then generated, for repetition_penalty); gen: the generated tokens (for
 * presence/frequency). Either may be empty (NULL, 0). */
struct sampler_hist {
	const uint32_t *seq;
	uint32_t n_seq;
	const uint32_t *gen;
	uint32_t n_gen;
};

/* Check the parameters (ERR_INVAL naming the field). */
int sampler_check(const struct sampler_params *p);

/* True when a penalty is set (the head must then give top-k candidates even
 * for greedy). */
bool sampler_has_penalty(const struct sampler_params *p);

/* True when the pick needs the head's top-k candidates rather than its
 * argmax: temperature > 0 or a penalty. */
bool sampler_wants_topk(const struct sampler_params *p);

/* Uniform double in [0, 1) determined by (seed, step) alone. */
double sampler_uniform(uint64_t seed, uint32_t step);

/* Pick from k candidates (1..SAMPLER_MAX_K) ids[]/logits[] (any order) for
 * generated-token index step, with the penalties over h (NULL = no history).
 * Non-finite logits are never chosen unless all are. *out = chosen id. */
int sampler_pick_hist(const struct sampler_params *p, const uint32_t *ids,
		      const float *logits, uint32_t k, uint32_t step,
		      const struct sampler_hist *h, uint32_t *out);

/* sampler_pick_hist without history (penalties then change nothing). */
int sampler_pick(const struct sampler_params *p, const uint32_t *ids, const float *logits,
		 uint32_t k, uint32_t step, uint32_t *out);

#endif
