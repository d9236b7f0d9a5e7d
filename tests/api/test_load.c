/* load: many concurrent streams against a deliberately slow cluster (the
 * gpu worker's test knob UNICORN_TEST_STEP_DELAY_MS) all complete: a busy
 * coordinator makes its clients wait, it never fails them (issue 36: with
 * more open requests than the coordinator held polls, they ended with
 * finish_reason "error", "coordinator busy: too many polls").
 *
 * Needs UNICORN_BIN (set by `make test`). Takes the cluster tests' lock. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/api/hostile.h"
#include "tests/proc.h"

/* --max-seqs 64 plus 8 of the 16 queued places: more open requests than
 * the coordinator held polls for before. Each step takes 4.5 s longer, more
 * than a client waits for one poll's answer (4 s): polls time out and are
 * repeated while the old ones are still held (before the fix, 59 of 72
 * streams failed: "too many polls", or cancelled). */
#define N_STREAMS 72
#define N_TOKENS 3

struct stream {
	int port;
	int status, finishes_length, errors, done;
	double secs;
	char first[400];
};

static void *one_stream(void *arg)
{
	struct stream *s = arg;
	const char *body = "{\"prompt\":\"Once upon a time\",\"max_tokens\":" "3"
			   ",\"stream\":true,\"temperature\":0}";
	char head[512];
	snprintf(head, sizeof head,
		 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n", strlen(body));
	size_t n;
	double t0 = proc_now_s();
	int fd = hx_dial(s->port, 120);
	if (fd < 0)
		return NULL;
	hx_send_all(fd, head, strlen(head));
	hx_send_all(fd, body, strlen(body));
	char *r = hx_recv_all(fd, &n);
	close(fd);
	s->secs = proc_now_s() - t0;
	s->status = hx_status(r);
	char *b = strstr(r, "\r\n\r\n");
	if (b)
		hx_unchunk(b + 4);
	size_t rl = strlen(r);
	snprintf(s->first, sizeof s->first, "%s", r + (rl > 399 ? rl - 399 : 0));
	/* greedy (sampled text may hold invalid UTF-8 that api/openai.c
	 * cannot encode yet: issue 35); an end-of-text token may still come
	 * before max_tokens */
	for (const char *p = r; (p = strstr(p, "\"finish_reason\":\"length\"")); p++)
		s->finishes_length++;
	for (const char *p = r; (p = strstr(p, "\"finish_reason\":\"stop\"")); p++)
		s->finishes_length++;
	for (const char *p = r; (p = strstr(p, "\"error\"")); p++)
		s->errors++;
	s->done = strstr(r, "data: [DONE]") != NULL;
	free(r);
	return NULL;
}

Test(load, streams_against_a_slow_cluster, .timeout = 300)
{
	struct proc_cluster c;
	setenv("UNICORN_TEST_STEP_DELAY_MS", "4500", 1);
	proc_cluster_start(&c, "load", (const char *const[]){ "--placement", "fused", "--max-seqs", "64", NULL });
	unsetenv("UNICORN_TEST_STEP_DELAY_MS");
	static struct stream s[N_STREAMS];
	pthread_t th[N_STREAMS];
	double t0 = proc_now_s();
	for (int i = 0; i < N_STREAMS; i++) {
		s[i] = (struct stream){ .port = c.port };
		cr_assert_eq(pthread_create(&th[i], NULL, one_stream, &s[i]), 0);
	}
	int ok = 0;
	for (int i = 0; i < N_STREAMS; i++) {
		pthread_join(th[i], NULL);
		ok += s[i].status == 200 && s[i].finishes_length == 1 && !s[i].errors && s[i].done;
	}
	cr_log_info("%d streams of %d tokens: %.1f s", N_STREAMS, N_TOKENS, proc_now_s() - t0);
	if (ok != N_STREAMS) {
		proc_tail(c.log, 30);
		for (int i = 0; i < N_STREAMS; i++)
			if (s[i].status != 200 || s[i].finishes_length != 1 || s[i].errors || !s[i].done)
				cr_log_error("stream %d (%.1f s): status %d, %d length finishes, %d errors, done %d: %s", i, s[i].secs,
					     s[i].status, s[i].finishes_length, s[i].errors, s[i].done, s[i].first);
	}
	cr_assert_eq(ok, N_STREAMS, "%d of %d streams completed", ok, N_STREAMS);
	cr_assert(!proc_log_has(c.log, "too many polls"));
	cr_assert(!proc_log_has(c.log, "a request failed"));
	proc_cluster_stop(&c);
}

/* A device slower than the step timeout is not a hung worker forever: the
 * first step past --step-timeout-ms is replayed (as for a hung worker), and
 * the timeout doubles until the steps fit, so the request still completes,
 * with the text a fast cluster gives (before: every replay timed out again
 * until the request failed; a long prompt's chunks on a loaded CI machine
 * took more than the fixed 10 s). */
Test(load, slow_steps_double_the_step_timeout, .timeout = 180)
{
	struct proc_cluster c;
	setenv("UNICORN_TEST_STEP_DELAY_MS", "600", 1);
	proc_cluster_start(&c, "slowstep", (const char *const[]){ "--placement", "fused", "--step-timeout-ms", "250",
								   NULL });
	unsetenv("UNICORN_TEST_STEP_DELAY_MS");
	const char *bin = proc_bin_dir();
	char cmd[512], slow[4096], again[4096];
	snprintf(cmd, sizeof cmd, "'%s/unicorn' run --name %s --max-tokens 3 --temp 0 --raw 'Once upon a time'",
		 bin, c.name);
	int st = proc_sh(cmd, slow, sizeof slow);
	if (st)
		proc_tail(c.log, 30);
	cr_assert_eq(st, 0, "the request failed on a slow device: %s", slow);
	cr_assert(proc_log_has(c.log, "the step timeout is 500 ms from now on"), "no doubling logged (log %s)", c.log);
	/* the same request again, now within the timeout: the same text */
	cr_assert_eq(proc_sh(cmd, again, sizeof again), 0, "%s", again);
	cr_assert_str_eq(slow, again);
	proc_cluster_stop(&c);
}
