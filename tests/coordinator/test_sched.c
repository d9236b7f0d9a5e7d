/* Scheduler logic tests: chunking, replay with identical chunks, resume
 * chunking, slots, queue bounds, split pipeline plans, UTF-8 holding. */
#include <criterion/criterion.h>
#include <string.h>

#include "coordinator/sched.h"
#include "common/err.h"

static uint32_t seqtok[1000];

static void fill(void)
{
	for (uint32_t i = 0; i < 1000; i++)
		seqtok[i] = 100 + i;
}

/* Feed everything, pushing a new token after each sampling chunk until
 * n_total tokens; record the chunks. */
static uint32_t run_to(struct sched_seq *s, uint32_t n_total, struct sched_chunk *log, uint32_t cap)
{
	uint32_t n = 0;
	struct sched_chunk c;
	while (sched_seq_next(s, &c)) {
		cr_assert_lt(n, cap);
		bool samples = sched_seq_chunk_samples(s, &c);
		cr_assert_eq(sched_seq_advance(s, &c), 0);
		log[n++] = c;
		if (samples && s->n_tok < n_total)
			cr_assert_eq(sched_seq_push(s, 5000 + s->n_tok), 0);
	}
	return n;
}

Test(sched, prompt_chunks_then_single_tokens)
{
	fill();
	struct sched_seq s;
	cr_assert_eq(sched_seq_init(&s, seqtok, 600, NULL, 0, 256), 0);
	struct sched_chunk log[64];
	uint32_t n = run_to(&s, 603, log, 64);
	cr_assert_eq(n, 3 + 3);
	cr_assert_eq(log[0].pos0, 0);
	cr_assert_eq(log[0].n, 256);
	cr_assert_eq(log[1].pos0, 256);
	cr_assert_eq(log[1].n, 256);
	cr_assert_eq(log[2].pos0, 512);
	cr_assert_eq(log[2].n, 88);
	for (uint32_t i = 3; i < 6; i++) {
		cr_assert_eq(log[i].n, 1);
		cr_assert_eq(log[i].pos0, 600 + i - 3);
	}
	cr_assert_eq(s.n_tok, 603);
	sched_seq_free(&s);
}

Test(sched, replay_uses_recorded_chunks)
{
	fill();
	struct sched_seq s;
	cr_assert_eq(sched_seq_init(&s, seqtok, 300, NULL, 0, 128), 0);
	struct sched_chunk log[64], again[64];
	uint32_t n = run_to(&s, 310, log, 64);
	/* one more generated token is pending (not fed yet) */
	cr_assert_eq(sched_seq_push(&s, 7), 0);
	struct sched_chunk c;
	cr_assert(sched_seq_next(&s, &c));
	/* the worker died: replay */
	sched_seq_replay(&s);
	uint32_t m = 0;
	while (sched_seq_next(&s, &c) && s.replaying) {
		cr_assert(!sched_seq_chunk_samples(&s, &c), "replayed chunks never sample");
		cr_assert_eq(sched_seq_advance(&s, &c), 0);
		again[m++] = c;
	}
	cr_assert_eq(m, n);
	cr_assert_eq(memcmp(log, again, n * sizeof log[0]), 0);
	/* then the pending token, alone, and it samples */
	cr_assert(sched_seq_next(&s, &c));
	cr_assert_eq(c.pos0, 310);
	cr_assert_eq(c.n, 1);
	cr_assert(sched_seq_chunk_samples(&s, &c));
	sched_seq_free(&s);
}

Test(sched, resume_chunks_match_original)
{
	fill();
	struct sched_seq a, b;
	cr_assert_eq(sched_seq_init(&a, seqtok, 200, NULL, 0, 64), 0);
	struct sched_chunk la[64], lb[64];
	uint32_t na = run_to(&a, 210, la, 64);
	/* a coordinator restart: prompt + the 10 generated tokens as resume[] */
	cr_assert_eq(sched_seq_init(&b, seqtok, 200, a.tokens + 200, 10, 64), 0);
	uint32_t nb = run_to(&b, 210, lb, 64);
	/* the original also fed its last token? no: it stops after sampling #10 */
	cr_assert_eq(na, nb + 0);
	cr_assert_eq(memcmp(la, lb, na * sizeof la[0]), 0);
	cr_assert_eq(memcmp(a.tokens, b.tokens, 210 * sizeof(uint32_t)), 0);
	sched_seq_free(&a);
	sched_seq_free(&b);
}

Test(sched, seq_rejects_bad_input)
{
	struct sched_seq s;
	uint32_t t[2] = { 1, 2 };
	cr_assert_eq(sched_seq_init(&s, t, 0, NULL, 0, 16), ERR_INVAL);
	cr_assert_eq(sched_seq_init(&s, t, 2, NULL, 0, 0), ERR_INVAL);
	cr_assert_eq(sched_seq_init(&s, t, 2, NULL, 0, MSG_MAX_TOKENS + 1), ERR_INVAL);
	cr_assert_eq(sched_seq_init(&s, t, 2, NULL, 1, 16), ERR_INVAL);
	cr_assert_eq(sched_seq_init(&s, t, 2, NULL, 0, 16), 0);
	struct sched_chunk bad = { 1, 1, 0 };
	cr_assert_eq(sched_seq_advance(&s, &bad), ERR_STATE);
	bad = (struct sched_chunk){ 0, 3, 0 };
	cr_assert_eq(sched_seq_advance(&s, &bad), ERR_STATE);
	sched_seq_free(&s);
}

Test(sched, slots_lowest_free)
{
	struct sched s;
	cr_assert_eq(sched_init(&s, 3, 2), 0);
	uint32_t a, b, c, d;
	cr_assert_eq(sched_slot_alloc(&s, &a), 0);
	cr_assert_eq(sched_slot_alloc(&s, &b), 0);
	cr_assert_eq(sched_slot_alloc(&s, &c), 0);
	cr_assert_eq(a, 0);
	cr_assert_eq(b, 1);
	cr_assert_eq(c, 2);
	cr_assert_eq(sched_slot_alloc(&s, &d), ERR_STATE);
	cr_assert_eq(sched_live(&s), 3);
	sched_slot_free(&s, 1);
	cr_assert_eq(sched_slot_alloc(&s, &d), 0);
	cr_assert_eq(d, 1);
	cr_assert_eq(sched_init(&s, 0, 2), ERR_INVAL);
	cr_assert_eq(sched_init(&s, SCHED_MAX_SEQS + 1, 2), ERR_INVAL);
}

Test(sched, queue_bounded_fifo)
{
	struct sched s;
	cr_assert_eq(sched_init(&s, 1, 3), 0);
	uint32_t slot;
	cr_assert_eq(sched_slot_alloc(&s, &slot), 0); /* the only slot is busy: 3 may wait */
	cr_assert_eq(sched_queue_push(&s, 11), 0);
	cr_assert_eq(sched_queue_push(&s, 12), 0);
	cr_assert_eq(sched_queue_push(&s, 13), 0);
	cr_assert_eq(sched_queue_push(&s, 14), ERR_RANGE);
	cr_assert_eq(sched_queue_pos(&s, 13), 3);
	cr_assert(sched_queue_remove(&s, 12));
	cr_assert(!sched_queue_remove(&s, 12));
	uint64_t id;
	cr_assert_eq(sched_queue_pop(&s, &id), 0);
	cr_assert_eq(id, 11);
	cr_assert_eq(sched_queue_push(&s, 15), 0);
	cr_assert_eq(sched_queue_pop(&s, &id), 0);
	cr_assert_eq(id, 13);
	cr_assert_eq(sched_queue_pop(&s, &id), 0);
	cr_assert_eq(id, 15);
	cr_assert_eq(sched_queue_pop(&s, &id), ERR_NOTFOUND);
	/* wrap around many times */
	for (uint64_t i = 0; i < 1000; i++) {
		cr_assert_eq(sched_queue_push(&s, i + 1), 0);
		cr_assert_eq(sched_queue_pop(&s, &id), 0);
		cr_assert_eq(id, i + 1);
	}
}

/* Every plan: each device runs one op per round, the two ops of a round
 * belong to different sequences, and each sequence's ops come in the order
 * embed, attn0, ffn0, attn1, ..., head. */
static void check_plan(uint32_t L, uint32_t n_seqs, bool h0, bool h1)
{
	struct sched_round r[SCHED_MAX_ROUNDS];
	bool head[2] = { h0, h1 };
	uint32_t n;
	cr_assert_eq(sched_split_plan(L, n_seqs, head, r, SCHED_MAX_ROUNDS, &n), 0);
	uint32_t next[2] = { 0, 0 }; /* 0 embed, 1+2l attn l, 2+2l ffn l, 1+2L head */
	uint32_t overlapped = 0;
	for (uint32_t k = 0; k < n; k++) {
		const struct sched_op *ops[2] = { &r[k].gpu, &r[k].npu };
		if (ops[0]->kind && ops[1]->kind) {
			overlapped++;
			cr_assert_neq(ops[0]->who, ops[1]->who, "round %u: one sequence on both", k);
		}
		cr_assert(ops[0]->kind != SCHED_OP_ATTN, "attention runs on the npu");
		cr_assert(ops[1]->kind == SCHED_OP_NONE || ops[1]->kind == SCHED_OP_ATTN);
		for (int d = 0; d < 2; d++) {
			const struct sched_op *o = ops[d];
			if (!o->kind)
				continue;
			cr_assert_lt(o->who, n_seqs);
			uint32_t want = next[o->who], got;
			switch (o->kind) {
			case SCHED_OP_EMBED: got = 0; break;
			case SCHED_OP_ATTN: got = 1 + 2u * o->layer; break;
			case SCHED_OP_FFN: got = 2 + 2u * o->layer; break;
			default: got = 1 + 2 * L; break;
			}
			cr_assert_eq(got, want, "round %u: seq %u op %u, expected %u", k, o->who,
				     got, want);
			next[o->who]++;
		}
	}
	cr_assert_eq(next[0], 1 + 2 * L + h0);
	if (n_seqs == 2) {
		cr_assert_eq(next[1], 1 + 2 * L + h1);
		cr_assert_eq(overlapped, 2 * L, "attention and FFN overlap on every layer");
	}
}

Test(sched, split_plans)
{
	check_plan(1, 1, true, false);
	check_plan(6, 1, false, false);
	check_plan(6, 2, true, true);
	check_plan(1, 2, false, true);
	check_plan(MSG_MAX_LAYERS, 2, true, false);
	struct sched_round r[4];
	bool h[2] = { true, true };
	uint32_t n;
	cr_assert_eq(sched_split_plan(6, 2, h, r, 4, &n), ERR_RANGE);
	cr_assert_eq(sched_split_plan(0, 1, h, r, 4, &n), ERR_INVAL);
	cr_assert_eq(sched_split_plan(6, 3, h, r, 4, &n), ERR_INVAL);
}

Test(sched, utf8_holds_partial)
{
	cr_assert_eq(sched_utf8_complete("abc", 3), 3);
	cr_assert_eq(sched_utf8_complete("a\xe2\x82", 3), 1);     /* 3-byte char, 2 present */
	cr_assert_eq(sched_utf8_complete("a\xe2\x82\xac", 4), 4); /* euro sign complete */
	cr_assert_eq(sched_utf8_complete("\xf0\x9f\x98", 3), 0);
	cr_assert_eq(sched_utf8_complete("\xf0\x9f\x98\x80", 4), 4);
	cr_assert_eq(sched_utf8_complete("\xc3", 1), 0);
	cr_assert_eq(sched_utf8_complete("\x80\x80\x80\x80\x80", 5), 5); /* invalid: let through */
	cr_assert_eq(sched_utf8_complete("", 0), 0);
}

/* A burst that fits the free slots is accepted even beyond queue_cap. */
Test(sched, burst_fits_free_slots)
{
	struct sched s;
	cr_assert_eq(sched_init(&s, 8, 2), 0);
	for (uint64_t i = 0; i < 10; i++)
		cr_assert_eq(sched_queue_push(&s, 100 + i), 0, "request %llu", (unsigned long long)i);
	cr_assert_eq(sched_queue_push(&s, 200), ERR_RANGE);
	uint32_t slot;
	uint64_t id;
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(sched_queue_pop(&s, &id), 0);
		cr_assert_eq(sched_slot_alloc(&s, &slot), 0);
	}
	cr_assert_eq(sched_queue_push(&s, 201), ERR_RANGE); /* 2 waiting, no free slot */
	sched_slot_free(&s, 0);
	cr_assert_eq(sched_queue_push(&s, 202), 0);
}

/* A shared prefix: the chunks it would have run are recorded, so a replay
 * recomputes it the same way; a replay may start at a chunk boundary. */
Test(sched, skip_prefix_and_replay_from)
{
	uint32_t p[100];
	for (uint32_t i = 0; i < 100; i++)
		p[i] = i;
	struct sched_seq s;
	cr_assert_eq(sched_seq_init(&s, p, 100, NULL, 0, 32), 0);
	cr_assert_eq(sched_seq_skip(&s, 48), ERR_STATE, "not whole chunks");
	cr_assert_eq(sched_seq_skip(&s, 64), 0);
	cr_assert_eq(s.n_fed, 64u);
	cr_assert_eq(s.n_chunks, 2u);
	struct sched_chunk c;
	cr_assert(sched_seq_next(&s, &c));
	cr_assert_eq(c.pos0, 64u);
	cr_assert_eq(c.n, 32u);
	cr_assert_eq(sched_seq_advance(&s, &c), 0);
	cr_assert(sched_seq_next(&s, &c));
	cr_assert_eq(c.n, 4u);
	cr_assert_eq(sched_seq_advance(&s, &c), 0);
	cr_assert_eq(sched_seq_skip(&s, 0), ERR_STATE, "not fresh");
	/* replay from a boundary: the chunks after it, in order; inside a wide
	 * chunk (the skipped ones are): its rest, then the next */
	cr_assert_eq(sched_seq_replay_from(&s, 70), ERR_STATE, "inside a narrow chunk");
	cr_assert_eq(sched_seq_replay_from(&s, 50), 0);
	cr_assert(sched_seq_next(&s, &c));
	cr_assert_eq(c.pos0, 50u);
	cr_assert_eq(c.n, 14u);
	cr_assert_eq(c.flags, SCHED_CHUNK_WIDE);
	struct sched_chunk part = { 50, 4, SCHED_CHUNK_WIDE };
	cr_assert_eq(sched_seq_advance(&s, &part), 0, "a wide chunk replays in pieces");
	cr_assert(sched_seq_next(&s, &c));
	cr_assert_eq(c.pos0, 54u);
	cr_assert_eq(c.n, 10u);
	c.flags = 0;
	cr_assert_eq(sched_seq_advance(&s, &c), ERR_STATE, "replayed in another kind");
	c.flags = SCHED_CHUNK_WIDE;
	cr_assert_eq(sched_seq_advance(&s, &c), 0);
	cr_assert(sched_seq_next(&s, &c));
	cr_assert_eq(c.pos0, 64u);
	cr_assert_eq(c.n, 32u);
	cr_assert_eq(c.flags, 0u);
	c.n = 16;
	cr_assert_eq(sched_seq_advance(&s, &c), ERR_STATE, "a narrow chunk replays whole");
	cr_assert_eq(sched_seq_replay_from(&s, 32), 0);
	cr_assert(sched_seq_next(&s, &c));
	cr_assert_eq(c.pos0, 32u);
	cr_assert_eq(c.n, 32u);
	cr_assert_eq(sched_seq_replay_from(&s, 100), 0);
	cr_assert(!s.replaying);
	cr_assert(!sched_seq_next(&s, &c));
	sched_seq_free(&s);
}

/* ---- fused rounds (sched_plan_round) ---- */

static struct sched_batch plan[SCHED_MAX_SEQS];

/* n fresh sequences with prompts len[i] (chunk_max 256, unit 32). */
static void seqs_init(struct sched_seq *s, struct sched_seq **ps, const uint32_t *len, uint32_t n)
{
	fill();
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(sched_seq_init(&s[i], seqtok, len[i], NULL, 0, 32), 0);
		cr_assert_eq(sched_seq_set_chunk_max(&s[i], 256), 0);
		ps[i] = &s[i];
	}
}

/* Run a planned round: advance every entry, push a token where it samples. */
static void round_ran(struct sched_seq **ps, const struct sched_batch *b, uint32_t nb)
{
	for (uint32_t k = 0; k < nb; k++)
		for (uint32_t i = 0; i < b[k].n; i++) {
			struct sched_seq *s = ps[b[k].e[i].seq];
			cr_assert_eq(b[k].e[i].c.flags, b[k].wide ? SCHED_CHUNK_WIDE : 0u);
			bool replayed = s->replaying;
			cr_assert_eq(sched_seq_advance(s, &b[k].e[i].c), 0, "%s", err_msg());
			if (b[k].e[i].samples && !replayed)
				cr_assert_eq(sched_seq_push(s, 9), 0);
		}
}

/* Prompts of different lengths admitted together: one wide submission with
 * every prompt whole (within the budget; the short ones beside the long),
 * each sampling its first token; then their decode tokens go narrow (few)
 * in one submission; short prompts alone run narrow. */
Test(sched, round_prefills_all_prompts_together)
{
	struct sched_seq s[4], *ps[4];
	const uint32_t len[4] = { 100, 7, 1, 250 };
	seqs_init(s, ps, len, 4);
	struct sched_round_opts o = { 512, 16, true };
	uint32_t nb;
	cr_assert_eq(sched_plan_round(ps, 4, &o, plan, SCHED_MAX_SEQS, &nb), 0);
	cr_assert_eq(nb, 1u);
	cr_assert(plan[0].wide);
	cr_assert_eq(plan[0].n, 4u);
	cr_assert_eq(plan[0].rows, 358u);
	for (uint32_t i = 0; i < 4; i++) {
		cr_assert_eq(plan[0].e[i].seq, i);
		cr_assert_eq(plan[0].e[i].c.pos0, 0u);
		cr_assert_eq(plan[0].e[i].c.n, len[i]);
		cr_assert(plan[0].e[i].samples);
	}
	round_ran(ps, plan, nb);
	cr_assert_eq(sched_plan_round(ps, 4, &o, plan, SCHED_MAX_SEQS, &nb), 0);
	cr_assert_eq(nb, 1u);
	cr_assert(!plan[0].wide, "4 decode tokens: narrow");
	cr_assert_eq(plan[0].rows, 4u);
	for (uint32_t i = 0; i < 4; i++)
		sched_seq_free(&s[i]);
	const uint32_t short_len[2] = { 31, 2 };
	seqs_init(s, ps, short_len, 2);
	cr_assert_eq(sched_plan_round(ps, 2, &o, plan, SCHED_MAX_SEQS, &nb), 0);
	cr_assert_eq(nb, 1u);
	cr_assert(!plan[0].wide, "pieces shorter than a unit, fewer than mm_min");
	o.mm_min = 2;
	cr_assert_eq(sched_plan_round(ps, 2, &o, plan, SCHED_MAX_SEQS, &nb), 0);
	cr_assert(plan[0].wide, "mm_min of them");
	for (uint32_t i = 0; i < 2; i++)
		sched_seq_free(&s[i]);
}

/* The budget: decode tokens first, then prompt chunks oldest first, cut to
 * whole units; the rest waits. A long prompt alone goes in chunks of 256. */
Test(sched, round_budget_cuts_prompts_to_units)
{
	struct sched_seq s[4], *ps[4];
	const uint32_t len[4] = { 600, 200, 100, 1 };
	seqs_init(s, ps, len, 4);
	/* sequence 3 is decoding already */
	struct sched_chunk c;
	cr_assert(sched_seq_next(&s[3], &c));
	cr_assert_eq(sched_seq_advance(&s[3], &c), 0);
	cr_assert_eq(sched_seq_push(&s[3], 5), 0);
	struct sched_round_opts o = { 512, 16, true };
	uint32_t nb;
	cr_assert_eq(sched_plan_round(ps, 4, &o, plan, SCHED_MAX_SEQS, &nb), 0);
	cr_assert_eq(nb, 1u, "the decode token rides beside the prompts");
	cr_assert(plan[0].wide);
	cr_assert_eq(plan[0].n, 4u);
	cr_assert_eq(plan[0].e[3].seq, 3u);
	cr_assert_eq(plan[0].e[3].c.n, 1u);
	cr_assert(plan[0].e[3].samples);
	cr_assert_eq(plan[0].e[0].c.n, 256u, "chunk_max");
	cr_assert(!plan[0].e[0].samples);
	cr_assert_eq(plan[0].e[1].c.n, 200u);
	cr_assert_eq(plan[0].e[2].c.n, 32u, "511 - 456 left: one unit");
	cr_assert(!plan[0].e[2].samples);
	cr_assert_eq(plan[0].rows, 489u);
	round_ran(ps, plan, nb);
	cr_assert_eq(s[2].n_fed, 32u);
	/* a budget smaller than a chunk: the first chunk still goes, whole */
	o.budget = 1;
	cr_assert_eq(sched_plan_round(ps + 0, 1, &o, plan, SCHED_MAX_SEQS, &nb), 0);
	cr_assert_eq(nb, 1u);
	cr_assert_eq(plan[0].e[0].c.pos0, 256u);
	cr_assert_eq(plan[0].e[0].c.n, 256u);
	for (uint32_t i = 0; i < 4; i++)
		sched_seq_free(&s[i]);
}

/* Wide decode: from mm_min decode tokens on they run wide, beside the
 * prompts in one submission; a replay keeps each chunk's recorded kind. */
Test(sched, round_wide_decode_and_replay_kinds)
{
	enum { N = 20 };
	struct sched_seq s[N], *ps[N];
	uint32_t len[N];
	for (uint32_t i = 0; i < N; i++)
		len[i] = 3 + i;
	seqs_init(s, ps, len, N);
	struct sched_round_opts o = { 512, 16, true };
	uint32_t nb;
	/* prefill all, then one decode round of 20 (wide) */
	for (int r = 0; r < 2; r++) {
		cr_assert_eq(sched_plan_round(ps, N, &o, plan, SCHED_MAX_SEQS, &nb), 0);
		cr_assert_eq(nb, 1u);
		cr_assert(plan[0].wide);
		cr_assert_eq(plan[0].n, (uint32_t)N);
		round_ran(ps, plan, nb);
	}
	/* 15 decoders (sequences 5.. stop): narrow */
	cr_assert_eq(sched_plan_round(ps, 15, &o, plan, SCHED_MAX_SEQS, &nb), 0);
	cr_assert_eq(nb, 1u);
	cr_assert(!plan[0].wide);
	round_ran(ps, plan, nb);
	/* sequence 0 replays: prompt wide, first decode wide, second narrow;
	 * the others decode (19 >= 16: wide) in the same rounds */
	sched_seq_replay(&s[0]);
	const bool kinds[3] = { true, true, false };
	for (uint32_t k = 0; k < 3; k++) {
		cr_assert_eq(sched_plan_round(ps, N, &o, plan, SCHED_MAX_SEQS, &nb), 0);
		bool found = false;
		for (uint32_t b = 0; b < nb; b++)
			for (uint32_t i = 0; i < plan[b].n; i++)
				if (plan[b].e[i].seq == 0) {
					cr_assert_eq(plan[b].wide, kinds[k], "replayed chunk %u in its recorded kind", k);
					cr_assert(!plan[b].e[i].samples || k == 2);
					found = true;
				}
		cr_assert(found);
		cr_assert_eq(nb, kinds[k] ? 1u : 2u);
		round_ran(ps, plan, nb);
	}
	cr_assert(!s[0].replaying);
	/* no batching: every chunk alone */
	o.batch = false;
	cr_assert_eq(sched_plan_round(ps, 3, &o, plan, SCHED_MAX_SEQS, &nb), 0);
	cr_assert_eq(nb, 3u);
	for (uint32_t b = 0; b < 3; b++)
		cr_assert_eq(plan[b].n, 1u);
	cr_assert_eq(sched_plan_round(ps, 3, &o, plan, 2, &nb), ERR_INVAL);
	for (uint32_t i = 0; i < N; i++)
		sched_seq_free(&s[i]);
}

/* After a coordinator restart a client resubmits prompt + resumed tokens:
 * the prompt goes wide (a whole unit), the resumed tokens narrow (as decode
 * fed them), even beside another sequence's wide prompt chunk. */
Test(sched, round_resumed_tokens_stay_narrow)
{
	fill();
	struct sched_seq s[2], *ps[2] = { &s[0], &s[1] };
	cr_assert_eq(sched_seq_init(&s[0], seqtok, 40, seqtok + 40, 3, 32), 0);
	cr_assert_eq(sched_seq_init(&s[1], seqtok, 1000, NULL, 0, 32), 0); /* wide chunks for 5 rounds */
	for (int i = 0; i < 2; i++)
		cr_assert_eq(sched_seq_set_chunk_max(&s[i], 256), 0);
	struct sched_round_opts o = { 256, 16, true };
	uint32_t nb, resumed_seen = 0, fresh_seen = 0;
	for (int r = 0; r < 5; r++) {
		cr_assert_eq(sched_plan_round(ps, 2, &o, plan, SCHED_MAX_SEQS, &nb), 0);
		for (uint32_t b = 0; b < nb; b++)
			for (uint32_t i = 0; i < plan[b].n; i++) {
				const struct sched_entry *e = &plan[b].e[i];
				if (e->seq == 0 && e->c.pos0 >= 40 && e->c.pos0 < 43) {
					cr_assert(!plan[b].wide, "resumed token at %u ran wide", e->c.pos0);
					resumed_seen++;
				}
				if (e->seq == 0 && e->c.pos0 >= 43) {
					cr_assert(plan[b].wide, "a fresh token beside a wide prompt chunk goes wide");
					fresh_seen++;
				}
			}
		round_ran(ps, plan, nb);
	}
	cr_assert_eq(resumed_seen, 3u);
	cr_assert_eq(fresh_seen, 1u);
	sched_seq_free(&s[0]);
	sched_seq_free(&s[1]);
}

/* Image spans (SCHED_IMAGE_ROW runs) are never cut: a prompt chunk ends at
 * an image's start or runs the image whole (past chunk_max), a budget cut
 * stops before an image, a skipped prefix is refused inside one and records
 * chunks that hold each image whole; chunks ending at an image run wide. */
Test(sched, image_spans_are_never_cut)
{
	uint32_t p[120];
	for (uint32_t i = 0; i < 120; i++)
		p[i] = i >= 20 && i < 68 ? SCHED_IMAGE_ROW | (i - 20) : i; /* a 48-row image at 20 */
	struct sched_seq s;
	cr_assert_eq(sched_seq_init(&s, p, 120, NULL, 0, 32), 0);
	struct sched_chunk c;
	cr_assert(sched_seq_next(&s, &c));
	cr_assert_eq(c.n, 20u, "cut back to the image's start");
	cr_assert_eq(sched_seq_advance(&s, &c), 0);
	cr_assert(sched_seq_next(&s, &c));
	cr_assert_eq(c.pos0, 20u);
	cr_assert_eq(c.n, 48u, "the image whole, past chunk_max");
	cr_assert_eq(sched_seq_advance(&s, &c), 0);
	cr_assert(sched_seq_span_cut(&s, 21) && sched_seq_span_cut(&s, 67) && !sched_seq_span_cut(&s, 20) &&
		  !sched_seq_span_cut(&s, 68));
	cr_assert_eq(sched_seq_span_start(&s, 50), 20u);
	sched_seq_free(&s);
	/* skip: refused inside the image; otherwise the image is one recorded chunk */
	cr_assert_eq(sched_seq_init(&s, p, 120, NULL, 0, 32), 0);
	cr_assert_eq(sched_seq_skip(&s, 32), ERR_STATE);
	cr_assert_eq(sched_seq_skip(&s, 96), 0, "%s", err_msg());
	cr_assert_eq(s.n_chunks, 3u);
	cr_assert_eq(s.chunks[0].n, 20u);
	cr_assert_eq(s.chunks[1].n, 48u);
	cr_assert_eq(s.chunks[2].n, 28u);
	sched_seq_free(&s);
	/* a round's budget cut stops before the image; the first chunk is wide */
	struct sched_seq a, b, *ps[2] = { &a, &b };
	uint32_t q[40];
	for (uint32_t i = 0; i < 40; i++)
		q[i] = i;
	cr_assert_eq(sched_seq_init(&a, q, 40, NULL, 0, 32), 0);
	cr_assert_eq(sched_seq_init(&b, p, 120, NULL, 0, 32), 0);
	cr_assert_eq(sched_seq_set_chunk_max(&a, 64), 0);
	cr_assert_eq(sched_seq_set_chunk_max(&b, 64), 0);
	struct sched_round_opts o = { 80, 16, true };
	struct sched_batch pl[SCHED_MAX_SEQS];
	uint32_t nb;
	cr_assert_eq(sched_plan_round(ps, 2, &o, pl, SCHED_MAX_SEQS, &nb), 0);
	cr_assert_eq(nb, 1u);
	cr_assert(pl[0].wide);
	cr_assert_eq(pl[0].n, 2u);
	cr_assert_eq(pl[0].e[1].c.n, 20u, "b's 32 left cut to the image's start");
	sched_seq_free(&a);
	sched_seq_free(&b);
}
