/* restarts: a restart never changes an answer (issue 37). Real clusters on the
 * tiny golden model, real kill -9s: after the loader restarted and then a
 * worker, every greedy answer is still the one a fresh cluster gives (the
 * coordinator re-attaches to the new loader's regions, a worker left on the
 * old ones refuses to serve and restarts). Fused and split.
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
#include <unistd.h>

#define N_GEN 16

static const char *const prompts[] = { "Once upon a time", "The quick brown fox jumps", "Hello world" };
#define N_PROMPTS 3

/* The live child of unicorn-up whose argv[0] ends in exe, or 0. */
static pid_t child_pid(const struct proc_cluster *c, const char *exe)
{
	return proc_child_of(c->sup, exe);
}

static pid_t kill_and_wait(const struct proc_cluster *c, const char *exe)
{
	pid_t old = child_pid(c, exe);
	cr_assert_gt(old, 0, "no %s running", exe);
	cr_assert_eq(kill(old, SIGKILL), 0);
	double end = proc_now_s() + 30;
	pid_t p;
	while (((p = child_pid(c, exe)) == 0 || p == old) && proc_now_s() < end)
		usleep(20 * 1000);
	if (p == 0 || p == old)
		proc_tail(c->log, 40);
	cr_assert(p != 0 && p != old, "%s (pid %d) not restarted", exe, (int)old);
	return p;
}

/* `unicorn run --json` of prompt: its whole output (ids and text). */
static void run(const struct proc_cluster *c, const char *prompt, char *out, size_t cap)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --json --max-tokens %d --timeout 120 '%s'",
		 proc_bin_dir(), c->name, N_GEN, prompt);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = 0;
	int st = pclose(f);
	if (st)
		proc_tail(c->log, 40);
	cr_assert_eq(st, 0, "unicorn run '%s' failed (status %d): %s", prompt, st, out);
	cr_assert(strstr(out, "\"ids\""), "no ids: %s", out);
}

static void runs(const struct proc_cluster *c, char out[N_PROMPTS][8192])
{
	for (int i = 0; i < N_PROMPTS; i++)
		run(c, prompts[i], out[i], sizeof out[i]);
}

static void assert_same(const struct proc_cluster *c, char base[N_PROMPTS][8192], const char *when)
{
	static char now[N_PROMPTS][8192];
	runs(c, now);
	for (int i = 0; i < N_PROMPTS; i++) {
		if (strcmp(base[i], now[i]))
			proc_tail(c->log, 60);
		cr_assert_str_eq(now[i], base[i], "%s: '%s' answered\n%s\ninstead of\n%s", when, prompts[i], now[i],
				 base[i]);
	}
}

/* The sequence: loader kill, its restart, then a worker kill. */
static void loader_then_workers(const char *const *extra, bool split)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "rst", extra);
	static char base[N_PROMPTS][8192];
	runs(&c, base);
	kill_and_wait(&c, "unicorn-loader");
	usleep(500 * 1000);
	assert_same(&c, base, "after the loader's restart");
	kill_and_wait(&c, "unicorn-gpu-worker");
	assert_same(&c, base, "after the loader's restart, then the gpu worker's");
	cr_assert(proc_log_has(c.log, "re-attached to"), "the coordinator never re-attached");
	if (split) {
		/* and once more the other way round: loader, then the npu worker */
		kill_and_wait(&c, "unicorn-loader");
		usleep(500 * 1000);
		kill_and_wait(&c, "unicorn-npu-worker");
		assert_same(&c, base, "after the loader's restart, then the npu worker's");
	}
	/* a coordinator restart on top: it attaches to the newest loader */
	kill_and_wait(&c, "unicorn-loader");
	usleep(500 * 1000);
	kill_and_wait(&c, "unicorn-coordinator");
	assert_same(&c, base, "after the loader's restart, then the coordinator's");
	proc_cluster_stop(&c);
}

TestSuite(restarts, .timeout = 300);

static void read_file(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s missing", path);
	size_t n = fread(buf, 1, cap - 1, f);
	buf[n] = 0;
	fclose(f);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

/* The start-time self-check: a worker whose fixed-token logits differ from the
 * first start's record refuses to serve (a request fails visibly, no wrong
 * answer); with the right record back it serves the same answers again. */
Test(restarts, selfcheck_refuses_a_mismatch)
{
	static const char *const extra[] = { "--no-http", "--placement", "fused", NULL };
	struct proc_cluster c;
	proc_cluster_start(&c, "rsc", extra);
	static char base[N_PROMPTS][8192];
	runs(&c, base);
	char rec[256], good[128];
	snprintf(rec, sizeof rec, "%s/selfcheck-gpu", c.dir);
	read_file(rec, good, sizeof good);
	cr_assert(!strncmp(good, "unicorn-selfcheck 1 ", 20), "record: %s", good);
	write_file(rec, "unicorn-selfcheck 1 0123456789abcdef\n");
	kill_and_wait(&c, "unicorn-gpu-worker");
	double end = proc_now_s() + 60;
	while (!proc_log_has(c.log, "refusing to serve") && proc_now_s() < end)
		usleep(100 * 1000);
	cr_assert(proc_log_has(c.log, "refusing to serve"), "no self-check refusal in the log");
	/* a request now either fails or waits: never a wrong answer */
	char cmd[512], out[8192];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --json --max-tokens %d --timeout 3 '%s' 2>&1",
		 proc_bin_dir(), c.name, N_GEN, prompts[0]);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	int st = pclose(f);
	cr_assert(st != 0 || !strcmp(out, base[0]), "a refused worker answered: %s", out);
	write_file(rec, good);
	assert_same(&c, base, "after the self-check passed again");
	proc_cluster_stop(&c);
}

Test(restarts, fused_loader_then_worker)
{
	static const char *const extra[] = { "--no-http", "--placement", "fused", NULL };
	loader_then_workers(extra, false);
}

Test(restarts, split_loader_then_workers)
{
	static const char *const extra[] = { "--no-http", "--placement", "split", "--attn-backend", "vulkan", NULL };
	loader_then_workers(extra, true);
}
