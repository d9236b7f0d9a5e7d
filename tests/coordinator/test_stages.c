/* coordinator stages: a pipeline FLOW's ops attributed to the stage that ran
 * them, and the chained decode steps: every micro-batch posted at once, each
 * re-posted as soon as it comes back (never waiting for the others), stopped
 * by its finish, its step limit or an error. */
#include <criterion/criterion.h>
#include <string.h>

#include "common/err.h"
#include "coordinator/stages.h"

Test(coord_stages, ops_per_stage)
{
	struct stages s = { 2, { 0, 3, 6 } };
	uint32_t ops[2];
	coord_stages_ops(&s, 6, true, ops);
	cr_assert_eq(ops[0], 1 + 6, "EMBED + 3 layers' attention and FFN");
	cr_assert_eq(ops[1], 6 + 1, "3 layers + HEAD");
	coord_stages_ops(&s, 6, false, ops);
	cr_assert_eq(ops[1], 6);
}

/* a fake pair of stages: FLOWs come back in the order they were posted */
struct fake {
	uint32_t queue[64], q_head, q_tail, next_seq;
	uint32_t posted[64], n_posted, finished[64], n_finished;
	uint32_t steps_ok[4];   /* finish says "more" this many times per micro-batch */
	int fail_at;            /* finish call that fails (-1: none) */
	uint32_t between;
};

static int f_post(void *ctx, uint32_t w, uint32_t *seq)
{
	struct fake *f = ctx;
	*seq = ++f->next_seq;
	f->queue[f->q_tail++ % 64] = w;
	f->posted[f->n_posted++] = w;
	return 0;
}

static int f_wait(void *ctx, uint32_t *seq, uint32_t n, uint32_t *which)
{
	struct fake *f = ctx;
	cr_assert_neq(f->q_head, f->q_tail, "waiting with nothing in flight");
	uint32_t w = f->queue[f->q_head++ % 64];
	cr_assert_lt(w, n);
	cr_assert_neq(seq[w], 0, "micro-batch %u came back without being posted", w);
	seq[w] = 0;
	*which = w;
	return 0;
}

static int f_finish(void *ctx, uint32_t w, bool *more)
{
	struct fake *f = ctx;
	if ((int)f->n_finished == f->fail_at)
		return err_set(ERR_IO, "fake: stage gone");
	f->finished[f->n_finished++] = w;
	*more = f->steps_ok[w] > 0;
	if (f->steps_ok[w])
		f->steps_ok[w]--;
	return 0;
}

static void f_between(void *ctx)
{
	((struct fake *)ctx)->between++;
}

static const struct stages_chain_ops ops = { f_post, f_wait, f_finish, f_between };

Test(coord_stages, chain_reposts_each_micro_batch_as_it_returns)
{
	struct fake f = { .steps_ok = { 2, 2 }, .fail_at = -1 };
	bool active[2] = { true, true };
	cr_assert_eq(coord_stages_chain(&ops, &f, 2, active, 64, 1000000000ll), 0, "%s", err_msg());
	/* 0, 1 posted together, then each again when it came back: 0 1 0 1 0 1 */
	cr_assert_eq(f.n_posted, 6);
	for (uint32_t i = 0; i < 6; i++)
		cr_assert_eq(f.posted[i], i % 2, "post %u went to micro-batch %u", i, f.posted[i]);
	cr_assert_eq(f.n_finished, 6);
	cr_assert_eq(f.between, 4);
	cr_assert_eq(f.q_head, f.q_tail, "returned with a step in flight");
}

Test(coord_stages, chain_stops_at_the_step_limit_and_skips_inactive)
{
	struct fake f = { .steps_ok = { 100, 100 }, .fail_at = -1 };
	bool active[2] = { false, true };
	cr_assert_eq(coord_stages_chain(&ops, &f, 2, active, 5, 1000000000ll), 0, "%s", err_msg());
	cr_assert_eq(f.n_posted, 5);
	for (uint32_t i = 0; i < f.n_posted; i++)
		cr_assert_eq(f.posted[i], 1);
}

Test(coord_stages, chain_returns_the_first_error)
{
	struct fake f = { .steps_ok = { 100, 100 }, .fail_at = 3 };
	bool active[2] = { true, true };
	cr_assert_eq(coord_stages_chain(&ops, &f, 2, active, 64, 1000000000ll), ERR_IO);
	cr_assert_eq(f.n_finished, 3);
}
