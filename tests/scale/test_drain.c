/* drain: a cluster leaves without dropping work (issue 34, docs/scale.md).
 * SIGTERM to unicorn-up (and `unicorn down --drain`) turns /health to 503
 * "draining" and new requests to 503 with Retry-After at once, lets running
 * and queued requests finish with their uninterrupted text, then stops;
 * the drain's timeout cuts what still runs. /health reports the load
 * (running, queued, slots), as /metrics does.
 *
 * Needs UNICORN_BIN (set by `make test`); skipped otherwise. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/golden.h"
#include "tests/proc.h"
#include "tests/scale/scale_util.h"

#define PROMPT "Once upon a time"

/* /health's status, running and queued (asserting the body's shape). */
static int health(int port, char *status, size_t cap, int *running, int *queued, int *slots)
{
	char body[512];
	int st = su_get(port, "/health", body, sizeof body);
	json_t *j = json_loads(body, 0, NULL);
	cr_assert_not_null(j, "/health (HTTP %d): %s", st, body);
	snprintf(status, cap, "%s", json_string_value(json_object_get(j, "status")));
	*running = (int)json_integer_value(json_object_get(j, "running"));
	*queued = (int)json_integer_value(json_object_get(j, "queued"));
	*slots = (int)json_integer_value(json_object_get(j, "slots"));
	json_decref(j);
	return st;
}

static void wait_health_ok(int port)
{
	double end = proc_now_s() + 30;
	while (su_get(port, "/health", NULL, 0) != 200) {
		cr_assert_lt(proc_now_s(), end, "/health not 200 within 30 s");
		usleep(50 * 1000);
	}
}

Test(drain, sigterm_finishes_running_and_queued_refuses_new, .timeout = 480)
{
	proc_bin_dir_or_skip();
	int lock = proc_cluster_lock();
	char tmp[] = "/tmp/unicorn-drain-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	setenv("XDG_RUNTIME_DIR", tmp, 1);
	unsetenv("UNICORN_API_KEY");
	struct su_cluster c;
	const char *extra[] = { "--max-seqs", "2", NULL };
	su_start_wait(&c, tmp, "dr", proc_free_port(), extra);
	wait_health_ok(c.port);

	/* the uninterrupted answer */
	struct su_req r[3];
	struct su_answer an;
	su_req_start(&r[0], tmp, 0, c.port, PROMPT, 48, NULL, 60);
	cr_assert_eq(proc_wait_ms(r[0].pid, 90000), 0);
	su_req_read(&r[0], &an);
	cr_assert(an.done, "reference: HTTP %d %s", an.status, an.error);
	char ref[4096];
	snprintf(ref, sizeof ref, "%s", an.text);

	/* three requests on two slots: 2 running, 1 queued, which /health says */
	for (int i = 0; i < 3; i++)
		su_req_start(&r[i], tmp, i, c.port, PROMPT, 48, NULL, 60);
	char st[32];
	int running = -1, queued = -1, slots = -1;
	double end = proc_now_s() + 20;
	do {
		cr_assert_lt(proc_now_s(), end, "/health never said 2 running, 1 queued (last: %s %d %d)", st, running,
			     queued);
		cr_assert_eq(health(c.port, st, sizeof st, &running, &queued, &slots), 200);
		cr_assert_str_eq(st, "ok");
		cr_assert_eq(slots, 2);
		usleep(20 * 1000);
	} while (running != 2 || queued != 1);
	/* /metrics carries the same */
	char out[65536];
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "curl -s http://127.0.0.1:%d/metrics | grep -E '^unicorn_(active_requests|queue_depth|slots) '",
		 c.port);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "unicorn_slots 2"), "%s", out);
	snprintf(cmd, sizeof cmd, "curl -s http://127.0.0.1:%d/metrics | grep '^unicorn_draining '", c.port);
	proc_sh(cmd, out, sizeof out);
	cr_assert(strstr(out, "unicorn_draining 0"), "/metrics before the drain: %s", out);

	/* SIGTERM: draining at once, new requests refused with Retry-After */
	double t_term = proc_now_s();
	cr_assert_eq(kill(c.sup, SIGTERM), 0);
	end = proc_now_s() + 2;
	int hs;
	while ((hs = health(c.port, st, sizeof st, &running, &queued, &slots)) == 200) {
		cr_assert_lt(proc_now_s(), end, "/health still 200 2 s after SIGTERM");
		usleep(10 * 1000);
	}
	cr_assert_eq(hs, 503);
	cr_assert_str_eq(st, "draining");
	fprintf(stderr, "drain: /health said draining %.3f s after SIGTERM (running %d, queued %d)\n",
		proc_now_s() - t_term, running, queued);
	snprintf(cmd, sizeof cmd, "curl -s -i http://127.0.0.1:%d/v1/completions -d '{\"prompt\":\"x\",\"max_tokens\":4}'",
		 c.port);
	proc_sh(cmd, out, sizeof out);
	cr_assert(!strncmp(out, "HTTP/1.1 503", 12), "a new request while draining: %s", out);
	cr_assert(strstr(out, "Retry-After: 1"), "%s", out);
	cr_assert(strstr(out, "\"code\":\"draining\""), "%s", out);

	/* /metrics says so too (the coordinator reads status.json's "draining") */
	snprintf(cmd, sizeof cmd, "curl -s http://127.0.0.1:%d/metrics | grep '^unicorn_draining '", c.port);
	end = proc_now_s() + 3;
	for (;;) {
		proc_sh(cmd, out, sizeof out);
		if (strstr(out, "unicorn_draining 1"))
			break;
		cr_assert_lt(proc_now_s(), end, "/metrics: no unicorn_draining 1 while draining: %s", out);
		usleep(50 * 1000);
	}

	/* unicorn status says so */
	snprintf(cmd, sizeof cmd, "%s/unicorn status --name %s", proc_bin_dir_or_skip(), c.name);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, ", draining ("), "unicorn status while draining: %s", out);

	/* the three finish with the uninterrupted text, then the cluster stops */
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(proc_wait_ms(r[i].pid, 90000), 0, "request %d", i);
		su_req_read(&r[i], &an);
		cr_assert(an.done, "request %d cut by the drain: HTTP %d %s", i, an.status, an.error);
		cr_assert_str_eq(an.text, ref, "request %d", i);
	}
	int ws = proc_wait_ms(c.sup, 20000);
	cr_assert(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "unicorn-up after the drain: status %d", ws);
	cr_assert(proc_log_has(c.log, "drained in"), "the log does not say the drain ended");
	fprintf(stderr, "drain: SIGTERM to exit %.2f s (2 running and 1 queued request finished)\n",
		proc_now_s() - t_term);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (system(cmd)) {}
	close(lock);
}

Test(drain, timeout_cuts_what_still_runs, .timeout = 420)
{
	proc_bin_dir_or_skip();
	int lock = proc_cluster_lock();
	char tmp[] = "/tmp/unicorn-draint-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	setenv("XDG_RUNTIME_DIR", tmp, 1);
	unsetenv("UNICORN_API_KEY");
	struct su_cluster c;
	su_start_wait(&c, tmp, "dt", proc_free_port(), NULL);
	wait_health_ok(c.port);
	/* a long request (4000 tokens: about a minute here) */
	struct su_req r;
	su_req_start(&r, tmp, 0, c.port, PROMPT, 4000, NULL, 60);
	char st[32];
	int running = 0, queued, slots;
	double end = proc_now_s() + 20;
	while (health(c.port, st, sizeof st, &running, &queued, &slots) == 200 && running < 1) {
		cr_assert_lt(proc_now_s(), end, "the request never ran");
		usleep(20 * 1000);
	}
	char cmd[600], out[4096];
	snprintf(cmd, sizeof cmd, "%s/unicorn down --name dt --drain --timeout 1", proc_bin_dir());
	double t = proc_now_s();
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	double took = proc_now_s() - t;
	cr_assert_geq(took, 1.0, "down --drain --timeout 1 returned after %.2f s", took);
	cr_assert_lt(took, 12.0, "down --drain --timeout 1 took %.2f s", took);
	/* the request ended (cut), it did not hang */
	int ws = proc_wait_ms(r.pid, 10000);
	cr_assert_geq(ws, 0, "the cut request still runs");
	struct su_answer an;
	su_req_read(&r, &an);
	cr_assert(!an.done, "the request finished within the drain's 1 s?");
	cr_assert(proc_log_has(c.log, "drain limit reached"), "the log does not say the drain was cut");
	cr_assert_geq(proc_wait_ms(c.sup, 10000), 0);
	fprintf(stderr, "drain: --timeout 1 cut a running request; down returned after %.2f s\n", took);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (system(cmd)) {}
	close(lock);
}

Test(drain, cli_options, .timeout = 30)
{
	const char *bin = proc_bin_dir_or_skip();
	char cmd[600], out[16384]; /* unicorn-up --help is over 4 KiB: a short buffer closes its pipe early */
	snprintf(cmd, sizeof cmd, "%s/unicorn down --timeout 5", bin);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 2, "%s", out);
	cr_assert(strstr(out, "--timeout applies to --drain only"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s/unicorn down --drain --timeout -1", bin);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 2, "%s", out);
	cr_assert(strstr(out, "--timeout '-1'"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s/unicorn down --drain --timeout 1e9", bin);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 2, "%s", out);
	snprintf(cmd, sizeof cmd, "%s/unicorn down --help", bin);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "--drain") && strstr(out, "Retry-After"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s/unicorn-up --model %s/golden/gemma3-tiny-q4_0.gguf --drain-timeout soon", bin,
		 golden_shared_dir());
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 2, "%s", out);
	cr_assert(strstr(out, "--drain-timeout 'soon'"), "%s", out);
	snprintf(cmd, sizeof cmd, "%s/unicorn-up --help", bin);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	cr_assert(strstr(out, "--drain-timeout"), "%s", out);
	char tmp[] = "/tmp/unicorn-drainc-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	setenv("XDG_RUNTIME_DIR", tmp, 1);
	snprintf(cmd, sizeof cmd, "%s/unicorn down --name nothere --drain", bin);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 1, "%s", out);
	rmdir(tmp);
}
