/* intake: the coordinator's side of coordinator.ipc (GEN_REQ / GEN_POLL /
 * GEN_CANCEL, docs/protocol.md) and the CLI's side (intake_client_generate).
 *
 * Server: a table of requests by client-chosen id. GEN_REQ is idempotent (a
 * resend gets the same ACK). GEN_POLL {from} is held (long-poll) until token
 * #from exists, the request ended (GEN_END when from == n_tokens), or wait_ms
 * passed (ACK ERR_TIMEOUT, value = tokens so far). An unknown id gets ERROR
 * ERR_NOTFOUND: after a coordinator restart that tells the CLI to resubmit
 * with resume[]. A request not polled for INTAKE_ABANDON_MS is cancelled.
 * Finished requests are kept a while so late polls still get GEN_END. */
#ifndef UNICORN_INTAKE_H
#define UNICORN_INTAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "constrain/constrain.h"
#include "coordinator/sampler.h"
#include "coordinator/sched.h"
#include "ipc/msg.h"

#define INTAKE_MAX_REQS 256
#define INTAKE_MAX_PENDING INTAKE_MAX_REQS /* held polls: at most one per request */
#define INTAKE_ABANDON_MS 5000
#define INTAKE_ORPHAN_MS 1000  /* a request whose client's link closed: cancelled unless
                                * polled over another link within this */
#define INTAKE_KEEP_DONE_MS 60000
#define INTAKE_MAX_TOP_LP 20       /* logprobs alternatives per token (OpenAI's cap) */

enum intake_state { INTAKE_FREE = 0, INTAKE_QUEUED, INTAKE_LIVE, INTAKE_DONE };

struct intake_req {
	int state;                   /* enum intake_state */
	uint64_t id;
	uint32_t peer;               /* the client's connection (bus_pending_peer) */
	struct sampler_params sp;
	uint32_t max_tokens, flags;
	uint32_t *prompt;            /* prompt token ids (template applied) */
	uint32_t n_prompt;
	uint32_t *resume;            /* tokens the client already had */
	uint32_t n_resume;
	uint32_t *gen;               /* generated tokens (resumed ones first) */
	char **pieces;               /* text of each (may be "") */
	uint32_t n_gen, cap_gen;
	char pend[8];                /* bytes of an unfinished UTF-8 character */
	uint32_t n_pend;
	uint32_t reason;             /* enum msg_end_reason once DONE */
	uint32_t fails;              /* step failures (recompute attempts) */
	bool has_slot;
	uint32_t slot;
	bool kv_paused;              /* preempted: no KV blocks, waits to be recomputed */
	uint64_t admit_seq;          /* admission order (the latest is preempted first) */
	struct sched_seq seq;
	/* logprobs (HTTP requests that ask for them; docs/http.md "Logprobs"):
	 * the head then runs top-k even for greedy, and take_token records per
	 * generated token i (same index as gen[]) lp[i] = logit - lse of the raw
	 * model distribution (temperature 1, before penalties) and the lp_n most
	 * likely tokens lp_ids/lp_vals[i * lp_n ..] with their logprobs. */
	bool want_lp;
	uint32_t lp_n;               /* alternatives per token, 0..INTAKE_MAX_TOP_LP */
	float *lp;                   /* [cap_lp] */
	uint32_t *lp_ids;            /* [cap_lp * lp_n] */
	float *lp_vals;              /* [cap_lp * lp_n] */
	uint32_t n_lp, cap_lp;       /* entries recorded (== n_gen for HTTP requests) */
	int64_t t_start, t_first, t_last_poll, t_done; /* ns, CLOCK_MONOTONIC */
	int64_t t_orphan;            /* ns: its client's link closed (0 = no) */
	int64_t t_deadline;          /* ns, CLOCK_MONOTONIC: ends with MSG_END_TIMEOUT after it; 0 = none */
	/* structured output and logit_bias (GEN_REQ v11; docs/http.md): these
	 * requests run the full-row head (MSG_CHUNK_HEAD_FULL) and pick from
	 * every token of the vocabulary */
	struct cs_schema *cs;        /* MSG_GEN_JSON: the compiled schema */
	struct cs_state *cst;        /* where the generated text stands against it */
	uint32_t n_bias;
	uint32_t *bias_ids;          /* [n_bias], ascending */
	float *bias;                 /* [n_bias] */
	/* images (GEN_REQ v12; coordinator/images.h): digest and first prompt
	 * position of each, img_rows rows each */
	uint32_t n_images, img_rows;
	uint8_t (*img_digest)[MSG_DIGEST];
	uint32_t *img_pos;
	bool head_gpu;               /* without logprobs, fused placement: the GPU top-k
				      * adds the biases and drops what the schema does not
				      * allow (MSG_CHUNK_HEAD_BIAS); no row comes back */
	bool mask_none;              /* head_gpu: the last mask allowed no token */
};

/* The request picks from the whole logit row (a schema or a logit_bias the
 * GPU top-k does not apply). */
static inline bool intake_req_full_row(const struct intake_req *r)
{
	return (r->cs || r->n_bias) && !r->head_gpu;
}

/* Free everything r owns (pieces, tokens, logprobs, its sequence) and zero it. */
void intake_req_clear(struct intake_req *r);

struct intake;

/* Called for a new GEN_REQ: tokenize its prompt (prompt[n_prompt], NUL after
 * it: g's own, or with MSG_GEN_STAGED the staged parts and g's) into
 * r->prompt (and place r: slot or queue, setting r->state). Return 0 or ERR_*
 * with err_set (the client gets ERROR with that text, and r is dropped). */
typedef int (*intake_submit_fn)(void *arg, const struct msg_gen_req *g, const char *prompt,
				uint32_t n_prompt, struct intake_req *r);

int intake_open(const char *url, intake_submit_fn submit, void *arg, struct intake **out);
void intake_close(struct intake *in);
/* A descriptor that polls readable when a CLI request waits (ipc/bus.h bus_recv_fd). */
int intake_wait_fd(struct intake *in, int *fd);

/* Receive every request that arrives within timeout_ms (the first wait only),
 * answer pending polls that can be answered, expire abandoned/old requests
 * (calling intake_finish with CANCELLED). */
int intake_serve(struct intake *in, int timeout_ms);
/* Iterate: requests by table index (NULL for free entries), i < INTAKE_MAX_REQS. */
struct intake_req *intake_at(struct intake *in, uint32_t i);

/* Append a generated token whose text is bytes[len] (partial UTF-8 is held
 * until complete). */
int intake_add_token(struct intake_req *r, uint32_t token, const char *bytes, size_t len);
void intake_finish(struct intake_req *r, uint32_t reason);

int64_t intake_now_ns(void);

/* --- CLI side -------------------------------------------------------- */

struct intake_gen_opts {
	uint32_t max_tokens;
	struct sampler_params sp;
	uint32_t flags;              /* MSG_GEN_CHAT, MSG_GEN_LOGPROBS */
	uint32_t top_logprobs;       /* 0..MSG_MAX_TOP_LP alternatives (with MSG_GEN_LOGPROBS) */
	int deadline_ms;             /* give up after this long without progress */
	uint32_t timeout_ms;         /* server-side limit of the whole request (GEN_REQ
	                              * timeout_ms); 0 = the server's --request-timeout */
	/* Called with each piece as it arrives (may be NULL). */
	void (*on_piece)(void *arg, const char *piece, size_t len);
	/* Called with every token as it arrives, empty pieces and logprobs
	 * included (may be NULL): the HTTP API needs the ids and logprobs. A
	 * token resumed after a coordinator restart is not seen twice. */
	void (*on_token)(void *arg, const struct msg_gen_token *t);
	/* Asked before each poll and every INTAKE_CLIENT_SLICE_MS while a call
	 * waits for its answer (may be NULL): true ends the request (GEN_CANCEL
	 * sent, best effort; reason MSG_END_CANCELLED), e.g. its HTTP client left
	 * or a stop string matched. */
	bool (*stop)(void *arg);
	/* Called once when the coordinator accepted the request (its first ACK;
	 * may be NULL): until then a failure is a refusal (queue full, bad
	 * prompt), after it the request ran. */
	void (*on_accept)(void *arg);
	void *arg;
	/* A prompt of token ids (the template applied) instead of text: sent as
	 * MSG_GEN_TOKENS, prompt/len are then ignored. 1..MSG_MAX_PROMPT/4 ids. */
	const uint32_t *prompt_ids;
	uint32_t n_prompt_ids;
	/* structured output (flags MSG_GEN_JSON): a JSON schema, n_schema bytes
	 * (0: any JSON object); logit_bias entries */
	const char *schema;
	uint32_t n_schema;
	const uint32_t *bias_ids;
	const float *bias;
	uint32_t n_bias;
	/* images of a prompt of ids (GEN_REQ v12): their digests, in order */
	const uint8_t (*images)[MSG_DIGEST];
	uint32_t n_images;
};

struct intake_gen_result {
	uint32_t *ids;
	uint32_t n_ids;
	char *text;                  /* NUL-terminated */
	size_t text_len;
	uint32_t reason;             /* enum msg_end_reason */
	uint32_t resubmits;          /* times the request was resubmitted */
};

/* The options as the CLI takes them: ERR_INVAL naming the flag (--temp,
 * --top-k, --top-p, --min-p, --repeat-penalty, --presence-penalty,
 * --frequency-penalty, --max-tokens) for a value GEN_REQ would refuse (the
 * ranges of the HTTP API; --repeat-penalty 0 is refused, 1 = off). */
int intake_gen_opts_check(const struct intake_gen_opts *o);
/* The sampler flags `unicorn run` and `unicorn chat` share, for their
 * getopt_long tables, and their parser: 1 when ch was one of them (its value
 * stored in o), 0 when it is not a sampler flag, -1 when arg is not a number.
 * Ranges are intake_gen_opts_check's job. */
#define INTAKE_SAMPLER_OPTIONS \
	{ "temp", required_argument, 0, 't' }, { "top-k", required_argument, 0, 'k' }, \
	{ "top-p", required_argument, 0, 'p' }, { "seed", required_argument, 0, 's' }, \
	{ "min-p", required_argument, 0, 'M' }, { "repeat-penalty", required_argument, 0, 'R' }, \
	{ "presence-penalty", required_argument, 0, 'E' }, { "frequency-penalty", required_argument, 0, 'F' }
int intake_gen_opt(int ch, const char *arg, struct intake_gen_opts *o);

/* Generate over coordinator.ipc of the cluster in rundir: submit, poll to the
 * end, resubmit with resume[] when the coordinator restarted.
 *
 * Each call is sent once and waited for until it is answered, the link
 * breaks (the coordinator died), stop or the deadline says so, or
 * INTAKE_CLIENT_CALL_MS passed (an answer lost: the call is sent again). The
 * coordinator reads its intake only between steps, and a step may take
 * longer than a poll is held (INTAKE_CLIENT_POLL_MS): a client that gave up
 * on a call after a few seconds and sent it again had the answer to the old
 * one dropped by its REQ link, and the new one waited behind it for the next
 * step; under load every answer went to a call already given up and the
 * request made no progress although the coordinator had run it. */
#define INTAKE_CLIENT_POLL_MS 2000   /* a poll is held this long at most (GEN_POLL wait_ms) */
#define INTAKE_CLIENT_CALL_MS 30000  /* a call unanswered this long is lost (3 steps at the default
				      * 10 s step timeout) */
#define INTAKE_CLIENT_SLICE_MS 200   /* stop and the deadline are asked this often while a call waits */
int intake_client_generate(const char *rundir, const char *prompt, size_t len,
			   const struct intake_gen_opts *o, struct intake_gen_result *res);
void intake_gen_result_free(struct intake_gen_result *res);

/* "no cluster 'NAME' is running" check: 0 if the supervisor pid is alive,
 * else ERR_NOTFOUND with that message. rundir_out gets the directory. */
int intake_client_find(const char *name, char *rundir_out, size_t cap);

const char *intake_reason_name(uint32_t reason);

#endif
