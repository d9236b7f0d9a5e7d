/* intake: the client against a coordinator that answers late, and the
 * server's abandon rule across a long step.
 *
 * The client against a coordinator that answers late: a fake
 * coordinator.ipc in a thread answers every call only after a delay, as the
 * real one does while a step keeps it from its intake (a 4.5 s step under
 * load: tests/api/test_load.c). A call the client stops waiting for and
 * sends again gets its answer dropped by the REQ link, and the new call
 * waits behind the old one: before the fix every answer went to a call
 * already given up, the request made no progress although the coordinator
 * had it (under load, HTTP streams never ended although the coordinator
 * had run their requests). */
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

#define MAX_HELD 64

struct fake {
	char dir[64];
	struct bus *b;
	pthread_t th;
	volatile int quit;
	int req_ms, poll_ms;   /* how late GEN_REQ / GEN_POLL from 0 are answered; < 0: never */
	/* what arrived (read by the test after join) */
	uint32_t n_req, n_poll, n_cancel;
};

struct held {
	struct bus_pending *p;
	struct msg m;
	double due;            /* < 0: never */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The request: one token " x", then the end (length). */
static void answer(struct held *h)
{
	static struct msg a;
	const struct msg *m = &h->m;
	if (m->type == MSG_GEN_POLL && m->u.gen_poll.from == 0) {
		msg_init(&a, MSG_GEN_TOKEN);
		a.u.gen_token.request_id = m->u.gen_poll.request_id;
		a.u.gen_token.index = 0;
		a.u.gen_token.token = 42;
		a.u.gen_token.n_piece = 2;
		memcpy(a.u.gen_token.piece, " x", 3);
	} else if (m->type == MSG_GEN_POLL) {
		msg_init(&a, MSG_GEN_END);
		a.u.gen_end.request_id = m->u.gen_poll.request_id;
		a.u.gen_end.n_tokens = 1;
		a.u.gen_end.reason = MSG_END_LENGTH;
	} else {
		msg_init(&a, MSG_ACK);
		a.u.ack.ack_seq = m->seq;
		a.u.ack.value = m->type == MSG_GEN_REQ ? m->u.gen_req.request_id : 0;
	}
	bus_reply(h->p, &a);
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	static struct held held[MAX_HELD];
	static struct msg in;
	uint32_t n = 0;
	while (!f->quit) {
		struct bus_pending *p;
		if (!bus_serve(f->b, 20, &in, &p)) {
			double t = now_s();
			int ms = in.type == MSG_GEN_REQ ? f->req_ms
				 : in.type == MSG_GEN_POLL && in.u.gen_poll.from == 0 ? f->poll_ms : 0;
			f->n_req += in.type == MSG_GEN_REQ;
			f->n_poll += in.type == MSG_GEN_POLL;
			f->n_cancel += in.type == MSG_GEN_CANCEL;
			if (n == MAX_HELD) {
				bus_pending_drop(p);
				continue;
			}
			held[n] = (struct held){ p, in, ms < 0 ? -1 : t + ms / 1000.0 };
			n++;
		}
		for (uint32_t i = 0; i < n;) {
			if (held[i].due >= 0 && now_s() >= held[i].due) {
				answer(&held[i]);
				held[i] = held[--n];
				continue;
			}
			i++;
		}
	}
	for (uint32_t i = 0; i < n; i++)
		bus_pending_drop(held[i].p);
	return NULL;
}

static void fake_start(struct fake *f, int req_ms, int poll_ms)
{
	memset(f, 0, sizeof *f);
	f->req_ms = req_ms;
	f->poll_ms = poll_ms;
	snprintf(f->dir, sizeof f->dir, "/tmp/unicorn-intake-XXXXXX");
	cr_assert_not_null(mkdtemp(f->dir));
	char url[BUS_URL_MAX];
	cr_assert_eq(rundir_url(f->dir, RUNDIR_COORDINATOR, url, sizeof url), 0);
	cr_assert_eq(bus_listen(url, BUS_REP, &f->b), 0, "%s", err_msg());
	cr_assert_eq(pthread_create(&f->th, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
	f->quit = 1;
	pthread_join(f->th, NULL);
	bus_close(f->b);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
	(void)!system(cmd);
}

/* Answers later than the client used to wait for a call (3 s for GEN_REQ,
 * 4 s for a poll) still reach it: each call is sent once and waited for. */
Test(intake_client, late_answers_reach_the_client, .timeout = 30)
{
	struct fake f;
	fake_start(&f, 3500, 4300);
	struct intake_gen_opts o = { .max_tokens = 1, .deadline_ms = 12000 };
	o.sp.top_p = 1, o.sp.repetition_penalty = 1;
	struct intake_gen_result res;
	double t0 = now_s();
	int rc = intake_client_generate(f.dir, "hello", 5, &o, &res);
	double secs = now_s() - t0;
	fake_stop(&f);
	cr_assert_eq(rc, 0, "%s (%.1f s; %u GEN_REQ, %u polls)", err_msg(), secs, f.n_req, f.n_poll);
	cr_assert_eq(res.n_ids, 1);
	cr_assert_str_eq(res.text, " x");
	cr_assert_eq(res.reason, MSG_END_LENGTH);
	/* nothing was sent twice */
	cr_assert_eq(f.n_req, 1, "%u GEN_REQ", f.n_req);
	cr_assert_eq(f.n_poll, 2, "%u polls", f.n_poll);
	cr_log_info("a token and the end against a coordinator 3.5 / 4.3 s late: %.1f s", secs);
	intake_gen_result_free(&res);
}

static bool stop_after_1s(void *arg)
{
	return now_s() > *(double *)arg + 1.0;
}

/* While a call waits, the client still asks stop (its HTTP client left): it
 * cancels within a fraction of a second, not once the call is answered. */
Test(intake_client, stop_while_a_poll_waits, .timeout = 30)
{
	struct fake f;
	fake_start(&f, 0, -1); /* a poll is never answered: a long step */
	double t0 = now_s();
	struct intake_gen_opts o = { .max_tokens = 1, .deadline_ms = 12000, .stop = stop_after_1s, .arg = &t0 };
	o.sp.top_p = 1, o.sp.repetition_penalty = 1;
	struct intake_gen_result res;
	int rc = intake_client_generate(f.dir, "hello", 5, &o, &res);
	double secs = now_s() - t0;
	usleep(100 * 1000); /* the GEN_CANCEL in */
	fake_stop(&f);
	cr_assert_eq(rc, 0, "%s", err_msg());
	cr_assert_eq(res.reason, MSG_END_CANCELLED);
	cr_assert_lt(secs, 2.0, "stopped after %.1f s", secs);
	cr_log_info("stop 1 s into a poll the coordinator holds: the request ended %.1f s in", secs);
	cr_assert_eq(f.n_cancel, 1);
	cr_assert_eq(f.n_poll, 1, "%u polls", f.n_poll);
	intake_gen_result_free(&res);
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
