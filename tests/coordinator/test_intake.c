/* intake: the server's abandon rule across a long step (a poll the
 * coordinator holds while a step keeps it from its intake is its client
 * waiting, not a client gone). */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "coordinator/intake.h"
#include "ipc/bus.h"
#include "ipc/rundir.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* --- the server: a poll held across a long step ------------------------ */

static int submit_live(void *arg, const struct msg_gen_req *g, const char *prompt, uint32_t n_prompt,
		       struct intake_req *r)
{
	(void)arg, (void)g, (void)prompt, (void)n_prompt;
	r->state = INTAKE_LIVE;
	return 0;
}

struct gen_thread {
	char dir[64];
	int rc;
	struct intake_gen_result res;
	volatile int done;
};

static void *gen_main(void *arg)
{
	struct gen_thread *t = arg;
	struct intake_gen_opts o = { .max_tokens = 1, .deadline_ms = 20000 };
	o.sp.top_p = 1, o.sp.repetition_penalty = 1;
	t->rc = intake_client_generate(t->dir, "hello", 5, &o, &t->res);
	__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static struct intake_req *only_req(struct intake *in)
{
	for (uint32_t i = 0; i < INTAKE_MAX_REQS; i++)
		if (intake_at(in, i))
			return intake_at(in, i);
	return NULL;
}

/* The coordinator reads its intake between steps only. A poll it holds
 * across a step longer than INTAKE_ABANDON_MS is its client waiting, not a
 * client gone: the request is not cancelled as "not polled" at the serve
 * that answers it (before: cancelled after its first token, once each
 * client waited for its poll's answer instead of asking again). */
Test(intake, a_poll_held_across_a_long_step_is_polling, .timeout = 30)
{
	struct gen_thread t = { 0 };
	snprintf(t.dir, sizeof t.dir, "/tmp/unicorn-intake-XXXXXX");
	cr_assert_not_null(mkdtemp(t.dir));
	char url[BUS_URL_MAX];
	cr_assert_eq(rundir_url(t.dir, RUNDIR_COORDINATOR, url, sizeof url), 0);
	struct intake *in;
	cr_assert_eq(intake_open(url, submit_live, NULL, &in), 0, "%s", err_msg());
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, gen_main, &t), 0);
	/* the request, then its first poll held (nothing generated yet) */
	double until = now_s() + 5;
	while (!only_req(in) && now_s() < until)
		intake_serve(in, 50);
	struct intake_req *r = only_req(in);
	cr_assert_not_null(r, "no GEN_REQ came");
	for (double end = now_s() + 0.5; now_s() < end;)
		intake_serve(in, 50);
	/* a step: the intake is not read */
	usleep((INTAKE_ABANDON_MS + 700) * 1000);
	cr_assert_eq(intake_add_token(r, 42, " x", 2), 0);
	intake_serve(in, 0); /* answers the held poll with the token */
	cr_assert_eq(r->state, INTAKE_LIVE, "the request was ended (reason %s) while its poll was held",
		     intake_reason_name(r->reason));
	intake_finish(r, MSG_END_LENGTH);
	for (double end = now_s() + 5; now_s() < end && !__atomic_load_n(&t.done, __ATOMIC_ACQUIRE);)
		intake_serve(in, 50); /* the GEN_END */
	pthread_join(th, NULL);
	intake_close(in);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", t.dir);
	(void)!system(cmd);
	cr_assert_eq(t.rc, 0, "%s", err_msg());
	cr_assert_eq(t.res.n_ids, 1);
	cr_assert_eq(t.res.reason, MSG_END_LENGTH, "reason %s", intake_reason_name(t.res.reason));
	intake_gen_result_free(&t.res);
}
