/* constrained: the coordinator's side of structured output and logit_bias
 * (docs/http.md "Structured output"): the vocabulary index, a request's
 * schema and bias, and the candidates of a step taken from the whole logit
 * row (MSG_CHUNK_HEAD_FULL) instead of the GPU's top-64. */
#ifndef UNICORN_CONSTRAINED_H
#define UNICORN_CONSTRAINED_H

#include <stdint.h>

#include "constrain/constrain.h"
#include "coordinator/intake.h"
#include "ipc/msg.h"
#include "tokenizer/tokenizer.h"

/* The vocabulary's token bytes as the detokenizer emits them (control and
 * unused tokens have none and are never allowed by a schema). */
int constrained_vocab(const struct tok *t, struct cs_vocab **out);

/* From GEN_REQ g into r: compile the schema (MSG_GEN_JSON), copy the bias
 * (ids < n_vocab, sorted), and feed r's resumed tokens through the schema.
 * ERR_UNSUP / ERR_RANGE / ERR_INVAL with the schema error. */
int constrained_setup(struct cs_vocab *v, uint32_t n_vocab, const struct msg_gen_req *g, struct intake_req *r);

/* After token was generated: advance r's schema state. *complete = the value
 * is whole (the generation ends). ERR_STATE if the token broke the schema. */
int constrained_feed(struct cs_vocab *v, struct intake_req *r, uint32_t token, bool *complete);

/* The step's candidates for the sampler: the k (<= MSG_MAX_TOPK) largest
 * biased logits of row[0..n_text) among the tokens the schema allows with
 * budget tokens left after this one (eos when the value may end there).
 * *k = 0: nothing allowed. */
int constrained_candidates(struct cs_vocab *v, struct intake_req *r, const float *row, uint32_t n_text,
			   uint32_t budget, int32_t eos, uint32_t *ids, float *vals, uint32_t *k);

/* The tokens the schema allows next with budget tokens left after this one
 * (none fit the budget: without it), and eos where the value may end: bit t
 * of allowed[(n_vocab + 63) / 64]. Returns how many (0: none) or ERR_*. */
int64_t constrained_mask(struct cs_vocab *v, struct intake_req *r, uint32_t budget, int32_t eos, uint64_t *allowed);

/* Several rows' masks of one step at once: on a few helper threads (each
 * with its own walk scratch) beside the caller, which returns when all are
 * done. Each job's got is constrained_mask's answer for it. */
struct mask_job {
	struct intake_req *r;
	uint32_t budget;
	int32_t eos;
	uint64_t *allowed; /* (cs_vocab_size + 63) / 64 words */
	int64_t got;
};
int constrained_masks(struct cs_vocab *v, struct mask_job *jobs, uint32_t n);

/* The raw model's k best tokens of row[0..n) (descending, lower id first on
 * ties) and the row's log-sum-exp, for logprobs of a full-row request. */
void constrained_raw_head(const float *row, uint32_t n, uint32_t k, uint32_t *ids, float *vals, float *lse);

#endif
