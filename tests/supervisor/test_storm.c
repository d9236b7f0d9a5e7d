/* storm: a restart never changes an answer, under load (issue 37). A real
 * cluster on the tiny golden model serves 8 greedy requests kept in flight
 * (half `unicorn run`, half HTTP /v1/completions through the API process)
 * while a random process (loader, workers, coordinator, API) gets SIGKILL
 * every 2-4 s for ~30 s. Every request must either finish with exactly the
 * answer of an uninterrupted run or fail visibly (the CLI's exit status, an
 * HTTP error or a reset connection: curl's exit status); none may finish
 * with another answer. Afterwards every answer is the fresh cluster's again.
 *
 * Needs UNICORN_BIN (set by `make test`); skipped otherwise. */
#include <criterion/criterion.h>

#include "tests/proc.h"

#include <ctype.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#define N_GEN 16
#define N_STREAMS 8
#define STORM_S 30.0

static const char *const prompts[] = { "Once upon a time", "The quick brown fox jumps", "Hello world",
				       "In the beginning" };
#define N_PROMPTS 4

/* The live child of unicorn-up whose argv[0] ends in exe, or 0. */
static pid_t child_pid(const struct proc_cluster *c, const char *exe)
{
	return proc_child_of(c->sup, exe);
}

/* A request's command line: CLI (its --json output) or HTTP (the response body). */
static void request_cmd(const struct proc_cluster *c, bool http, int p, const char *out, char *cmd, size_t cap)
{
	if (http)
		snprintf(cmd, cap, "exec curl -sS -f --max-time 90 -o %s http://127.0.0.1:%d/v1/completions "
			 "-d '{\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0}'", out, c->port, prompts[p], N_GEN);
	else
		snprintf(cmd, cap, "exec %s/unicorn run --name %s --json --max-tokens %d --timeout 90 '%s' > %s",
			 proc_bin_dir(), c->name, N_GEN, prompts[p], out);
}

/* The answer in a finished request's output: the CLI's ids and text, or the
 * completion's text and finish_reason. Returns false when it has none. */
static bool answer_of(bool http, const char *path, char *ans, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	static char buf[65536];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	fclose(f);
	json_error_t je;
	json_t *j = json_loads(buf, 0, &je);
	if (!j)
		return false;
	bool ok = false;
	if (http) {
		json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
		const char *t = json_string_value(json_object_get(ch, "text"));
		const char *r = json_string_value(json_object_get(ch, "finish_reason"));
		if (t && r) {
			snprintf(ans, cap, "%s|%s", t, r);
			ok = true;
		}
	} else {
		char *ids = json_dumps(json_object_get(j, "ids"), JSON_COMPACT);
		const char *t = json_string_value(json_object_get(j, "text"));
		const char *r = json_string_value(json_object_get(j, "reason"));
		if (ids && t && r) {
			snprintf(ans, cap, "%s|%s|%s", ids, t, r);
			ok = true;
		}
		free(ids);
	}
	json_decref(j);
	return ok;
}

/* One request, synchronously: its answer (asserting that it finished). */
static void request_sync(const struct proc_cluster *c, bool http, int p, char *ans, size_t cap)
{
	char out[300], cmd[1024];
	snprintf(out, sizeof out, "%s/sync.out", c->tmp);
	request_cmd(c, http, p, out, cmd, sizeof cmd);
	int st = system(cmd);
	if (st)
		proc_tail(c->log, 40);
	cr_assert_eq(st, 0, "%s request '%s' failed (status %d)", http ? "HTTP" : "CLI", prompts[p], st);
	cr_assert(answer_of(http, out, ans, cap), "%s request '%s': no answer", http ? "HTTP" : "CLI", prompts[p]);
}

/* The cluster is whole again: every role running, ready and api-ready there. */
static void wait_whole(const struct proc_cluster *c, const char *const *roles, int n_roles)
{
	char ready[300], api[300];
	snprintf(ready, sizeof ready, "%s/ready", c->dir);
	snprintf(api, sizeof api, "%s/api-ready", c->dir);
	double end = proc_now_s() + 90;
	for (;;) {
		bool ok = !access(ready, F_OK) && !access(api, F_OK);
		for (int i = 0; ok && i < n_roles; i++)
			ok = child_pid(c, roles[i]) != 0;
		if (ok)
			return;
		if (proc_now_s() > end) {
			proc_tail(c->log, 60);
			cr_assert_fail("the cluster did not come back within 90 s after the storm");
		}
		usleep(100 * 1000);
	}
}

struct stream {
	pid_t pid;
	bool http;
	int prompt;
	char out[300];
};

/* A request ended with wait status st: right, wrong or failed visibly. */
static void classify(const struct stream *s, int st, char base[2][N_PROMPTS][4096], int *right, int *wrong,
		     int *failed)
{
	char ans[4096];
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !answer_of(s->http, s->out, ans, sizeof ans)) {
		(*failed)++; /* visibly: an exit status, an HTTP error, a reset connection */
		return;
	}
	if (!strcmp(ans, base[s->http][s->prompt])) {
		(*right)++;
		return;
	}
	(*wrong)++;
	cr_log_error("WRONG %s answer to '%s':\n  %s\nwant\n  %s", s->http ? "HTTP" : "CLI", prompts[s->prompt], ans,
		     base[s->http][s->prompt]);
	fprintf(stderr, "WRONG %s answer to '%s':\n  %s\nwant\n  %s\n", s->http ? "HTTP" : "CLI", prompts[s->prompt],
		ans, base[s->http][s->prompt]);
}

static void storm(const char *placement, unsigned seed)
{
	bool split = !strcmp(placement, "split");
	const char *extra[] = { "--placement", placement, "--attn-backend", "vulkan", NULL };
	struct proc_cluster c;
	proc_cluster_start(&c, "storm", extra);
	static char base[2][N_PROMPTS][4096];
	for (int h = 0; h < 2; h++)
		for (int p = 0; p < N_PROMPTS; p++)
			request_sync(&c, h, p, base[h][p], sizeof base[h][p]);

	static const char *const fused_roles[] = { "unicorn-loader", "unicorn-gpu-worker", "unicorn-coordinator",
						   "unicorn-api" };
	static const char *const split_roles[] = { "unicorn-loader", "unicorn-gpu-worker", "unicorn-npu-worker",
						   "unicorn-coordinator", "unicorn-api" };
	const char *const *roles = split ? split_roles : fused_roles;
	int n_roles = split ? 5 : 4;

	struct stream s[N_STREAMS];
	memset(s, 0, sizeof s);
	int right = 0, wrong = 0, failed = 0, kills = 0, started = 0;
	int killed[5] = { 0 };
	double t0 = proc_now_s(), next_kill = t0 + 2.0 + (rand_r(&seed) % 2000) / 1000.0;
	while (proc_now_s() - t0 < STORM_S) {
		for (int i = 0; i < N_STREAMS; i++) {
			if (s[i].pid) {
				int st;
				pid_t r = waitpid(s[i].pid, &st, WNOHANG);
				if (r != s[i].pid)
					continue;
				s[i].pid = 0;
				classify(&s[i], st, base, &right, &wrong, &failed);
			}
			if (!s[i].pid && proc_now_s() - t0 < STORM_S - 1) {
				s[i].http = i % 2;
				s[i].prompt = (i + started) % N_PROMPTS;
				snprintf(s[i].out, sizeof s[i].out, "%s/s%d.out", c.tmp, i);
				unlink(s[i].out);
				char cmd[1024];
				request_cmd(&c, s[i].http, s[i].prompt, s[i].out, cmd, sizeof cmd);
				char *argv[] = { "/bin/sh", "-c", cmd, NULL };
				char err[300];
				snprintf(err, sizeof err, "%s/s%d.err", c.tmp, i);
				s[i].pid = proc_spawn(argv, err);
				started++;
			}
		}
		if (proc_now_s() >= next_kill) {
			int v = (int)(rand_r(&seed) % (unsigned)n_roles);
			pid_t p = child_pid(&c, roles[v]);
			if (p > 0 && kill(p, SIGKILL) == 0) {
				kills++;
				killed[v]++;
			}
			next_kill = proc_now_s() + 2.0 + (rand_r(&seed) % 2000) / 1000.0;
		}
		usleep(20 * 1000);
	}
	/* the requests still in flight finish (or fail) */
	for (int i = 0; i < N_STREAMS; i++) {
		if (!s[i].pid)
			continue;
		int st = proc_wait_ms(s[i].pid, 120000);
		if (st < 0) {
			kill(s[i].pid, SIGKILL);
			waitpid(s[i].pid, &st, 0);
			failed++;
			continue;
		}
		classify(&s[i], st, base, &right, &wrong, &failed);
	}
	char line[256];
	int o = snprintf(line, sizeof line, "%s storm: %d kills (", placement, kills);
	for (int i = 0; i < n_roles && o > 0 && (size_t)o < sizeof line; i++)
		o += snprintf(line + o, sizeof line - (size_t)o, "%s%s %d", i ? ", " : "", roles[i] + 8, killed[i]);
	fprintf(stderr, "%s): %d right, %d wrong, %d failed visibly (of %d started)\n", line, right, wrong, failed,
		started);
	cr_assert_eq(wrong, 0, "%d requests finished with a wrong answer", wrong);
	cr_assert_gt(right, 0, "no request finished during the storm");
	cr_assert_gt(kills, 5, "only %d kills", kills);
	/* the final round: the fresh cluster's answers */
	wait_whole(&c, roles, n_roles);
	for (int h = 0; h < 2; h++)
		for (int p = 0; p < N_PROMPTS; p++) {
			char ans[4096];
			request_sync(&c, h, p, ans, sizeof ans);
			cr_assert_str_eq(ans, base[h][p], "final round, %s '%s'", h ? "HTTP" : "CLI", prompts[p]);
		}
	proc_cluster_stop(&c);
}

TestSuite(storm, .timeout = 400);

Test(storm, fused_kills_change_no_answer)
{
	storm("fused", 37);
}

Test(storm, split_kills_change_no_answer)
{
	storm("split", 3737);
}
