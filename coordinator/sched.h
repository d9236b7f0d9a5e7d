/* sched: the coordinator's bookkeeping that needs no processes.
 *
 *  - slots: each live sequence owns one slot (activation-region slot and KV
 *    slot in every worker), lowest free first; max_seqs of them.
 *  - a bounded FIFO of waiting request ids (full -> the request is refused).
 *  - per sequence: every token (prompt, then generated/resumed) and the chunks
 *    it was fed in. Prompt tokens go in chunks of up to chunk_max, every later
 *    token alone (as decode feeds it). After a worker restart the sequence is
 *    replayed from position 0 with exactly the recorded chunks, so the rebuilt
 *    KV cache, and every later token, is bit-identical. A coordinator restart
 *    (prompt + resume[]) produces the same chunks by the same rule.
 *  - the fused placement's round plan (sched_plan_round): every live
 *    sequence's next chunk, prompt chunks cut to a per-round token budget,
 *    grouped into at most two RUN_CHUNKS submissions by kernel kind.
 *  - the split-placement step plan: rounds of at most one gpu op and one npu
 *    op; with two sequences A and B the attention of one overlaps the FFN of
 *    the other. */
#ifndef UNICORN_SCHED_H
#define UNICORN_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "ipc/msg.h"

#define SCHED_MAX_SEQS MSG_MAX_SLOTS
#define SCHED_MAX_QUEUE 256

/* chunk flags: SCHED_CHUNK_WIDE = it ran (and replays) on the mat-mat kernel
 * (RUN_CHUNKS flag MSG_CHUNKS_WIDE); without it every row ran as a lone
 * decode token. A row's numbers depend only on this kind, never on the rest
 * of its submission or on where its chunk was cut, so a replayed chunk (whole
 * or, when wide, from any position on) rebuilds the same KV bit for bit. */
#define SCHED_CHUNK_WIDE 1u
struct sched_chunk {
	uint32_t pos0, n;
	uint32_t flags;
};

struct sched_seq {
	uint32_t *tokens;            /* prompt then generated tokens */
	uint32_t n_tok, cap_tok;
	uint32_t n_prompt;
	uint32_t n_resumed;          /* prompt + resumed tokens (a client's resubmission) */
	uint32_t n_fed;              /* tokens whose KV the workers hold */
	struct sched_chunk *chunks;  /* chunks fed so far, in order */
	uint32_t n_chunks, cap_chunks;
	uint32_t replay_idx;         /* next recorded chunk while replaying */
	bool replaying;
	uint32_t chunk_max;          /* 1..MSG_MAX_TOKENS: longest prompt chunk */
	uint32_t unit;               /* prefix unit: chunk_max is a multiple; skips and cuts go by it */
};

/* Prompt ids with this bit are an image's rows (docs/vision.md): a maximal
 * run of them is one image, never cut between chunks (its rows attend in
 * both directions), so chunk ends, budget cuts and skipped prefixes stop at
 * an image's start or its end. */
#define SCHED_IMAGE_ROW 0x80000000u
/* True when pos lies inside an image (after its first row). */
bool sched_seq_span_cut(const struct sched_seq *s, uint32_t pos);
/* pos, or the first row of the image pos lies inside. */
uint32_t sched_seq_span_start(const struct sched_seq *s, uint32_t pos);

/* prompt[n_prompt] (>= 1) then resume[n_resume] (already generated); prompt
 * chunks of chunk_max, which is also the unit (sched_seq_set_chunk_max). */
int sched_seq_init(struct sched_seq *s, const uint32_t *prompt, uint32_t n_prompt,
		   const uint32_t *resume, uint32_t n_resume, uint32_t chunk_max);
void sched_seq_free(struct sched_seq *s);
/* Longer prompt chunks: n (<= MSG_MAX_TOKENS) a multiple of the unit
 * (ERR_INVAL otherwise). */
int sched_seq_set_chunk_max(struct sched_seq *s, uint32_t n);
/* Append a generated token (fed by a later chunk). */
int sched_seq_push(struct sched_seq *s, uint32_t token);
/* Next chunk to feed; false when every token is fed (time to sample). While
 * replaying: the rest of the recorded chunk from n_fed on, with its flags. */
bool sched_seq_next(const struct sched_seq *s, struct sched_chunk *c);
/* Record that c ran: the chunk sched_seq_next gave, or (a prompt chunk, or
 * a wide replayed one) its first c->n tokens. */
int sched_seq_advance(struct sched_seq *s, const struct sched_chunk *c);
/* True when the chunk c ends at the last token: its head output is sampled. */
bool sched_seq_chunk_samples(const struct sched_seq *s, const struct sched_chunk *c);
/* Forget the workers' state: replay the recorded chunks from position 0. */
void sched_seq_replay(struct sched_seq *s);
/* Replay from pos on: positions before it are in the workers' KV (a shared
 * prefix); pos must end a recorded chunk or lie inside a wide one (ERR_STATE
 * otherwise). */
int sched_seq_replay_from(struct sched_seq *s, uint32_t pos);
/* A fresh sequence whose first n prompt positions are already in the KV
 * cache (a shared prefix): record wide chunks of the unit for them (n must
 * be a multiple of it; prompt chunks always run wide), so a replay from 0
 * recomputes them exactly as they were computed. */
int sched_seq_skip(struct sched_seq *s, uint32_t n);

struct sched {
	uint32_t max_seqs;
	bool used[SCHED_MAX_SEQS];
	uint64_t queue[SCHED_MAX_QUEUE];
	uint32_t q_head, q_len, q_cap;
};

int sched_init(struct sched *s, uint32_t max_seqs, uint32_t queue_cap);
/* Lowest free slot; ERR_STATE when all are taken. */
int sched_slot_alloc(struct sched *s, uint32_t *slot);
void sched_slot_free(struct sched *s, uint32_t slot);
uint32_t sched_live(const struct sched *s);
/* ERR_RANGE when the queue is full: it holds at most queue_cap requests
 * beyond the free slots. */
int sched_queue_push(struct sched *s, uint64_t id);
/* ERR_NOTFOUND when empty. */
int sched_queue_pop(struct sched *s, uint64_t *id);
/* The id sched_queue_pop would return, left in place. */
int sched_queue_peek(const struct sched *s, uint64_t *id);
/* Remove id (cancelled while waiting); true if it was there. */
bool sched_queue_remove(struct sched *s, uint64_t id);
/* 1-based position of id in the queue, 0 if absent. */
uint32_t sched_queue_pos(const struct sched *s, uint64_t id);

/* Fused placement: one round's RUN_CHUNKS submissions.
 * - Which chunks: fresh single tokens (decode, resumed) always go (at most
 *   one per sequence); prompt and replayed chunks take what is left of the
 *   budget (rows per round), oldest sequence first, cut down to a multiple of
 *   the unit (a prompt's last piece goes whole when it fits; a narrow
 *   replayed chunk is one token); the rest wait for the next round. The first
 *   chunk of a round always goes whole, so the oldest sequence progresses.
 * - Kinds: a prompt chunk holding a whole unit runs wide (so every cached
 *   prefix unit was computed wide, and sched_seq_skip records it so); a
 *   replayed chunk in its recorded kind; the others (decode tokens, a
 *   prompt's last piece shorter than a unit) run wide beside wide chunks or
 *   when there are at least mm_min of them (0: only beside), else narrow.
 * - batch false: every chunk alone, no budget, the others narrow (A/B).
 * At most two submissions (wide first), each <= MSG_MAX_ROWS rows when budget
 * <= MSG_MAX_ROWS (a round's rows exceed the budget only by a lone first
 * chunk, <= MSG_MAX_TOKENS). Entry i's chunk carries the submission's kind
 * in its flags: pass it to sched_seq_advance after the submission ran. */
struct sched_round_opts {
	uint32_t budget;             /* rows per round, >= 1 */
	uint32_t mm_min;             /* single-token chunks from which they run wide; 0 never */
	bool batch;                  /* false: one submission per chunk */
};
struct sched_entry {
	uint32_t seq;                /* index into the caller's seqs[] */
	struct sched_chunk c;
	bool samples;                /* the chunk ends at the sequence's last token */
};
struct sched_batch {
	bool wide;
	uint32_t n, rows;
	struct sched_entry e[SCHED_MAX_SEQS];
};
/* seqs[0..n) (n <= SCHED_MAX_SEQS), oldest first; out[cap] (cap >= 2, or >= n
 * without batching). */
int sched_plan_round(struct sched_seq *const *seqs, uint32_t n, const struct sched_round_opts *o,
		     struct sched_batch *out, uint32_t cap, uint32_t *n_out);

/* Split-placement plan for one or two sequences (who 0 = A, 1 = B). */
enum sched_op_kind {
	SCHED_OP_NONE = 0, SCHED_OP_EMBED, SCHED_OP_ATTN, SCHED_OP_FFN, SCHED_OP_HEAD,
};
struct sched_op {
	uint8_t kind;       /* enum sched_op_kind */
	uint8_t who;        /* 0 or 1 */
	uint16_t layer;
};
struct sched_round {
	struct sched_op gpu, npu;
};
#define SCHED_MAX_ROUNDS (2 * MSG_MAX_LAYERS + 4)
/* head[who]: whether that sequence's step ends in a head. */
int sched_split_plan(uint32_t n_layers, uint32_t n_seqs, const bool *head,
		     struct sched_round *out, uint32_t cap, uint32_t *n_rounds);

/* Length of the longest prefix of s[n] that does not end inside a UTF-8
 * sequence (bytes after it wait for the next token). Invalid bytes count as
 * complete, so nothing is held forever. */
uint32_t sched_utf8_complete(const char *s, uint32_t n);

#endif
