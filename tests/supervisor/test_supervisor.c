/* supervisor: the supervision mechanism with real child processes: /bin/sh
 * one-liners, and this test binary re-executed as a ctl-speaking child (the
 * constructor below takes over before Criterion starts when
 * UNICORN_TEST_CTL_CHILD is set). */
#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/supervisor.h"
#include "ipc/ctl.h"
#include "common/err.h"
#include "tests/proc.h"

/* ---- the ctl child: heartbeats until SHUTDOWN, then exits 0 ----
 * UNICORN_TEST_CTL_MODE: "idle" sleeps in poll on ctl_wake_fd as an idle
 * process does (heartbeat every 10 s); "stuck" stops heartbeating after
 * 300 ms (its stall limit: 500 ms) but keeps its ctl thread. */
__attribute__((constructor)) static void ctl_child(void)
{
	const char *dir = getenv("UNICORN_TEST_CTL_CHILD");
	if (!dir)
		return;
	const char *mode = getenv("UNICORN_TEST_CTL_MODE");
	bool idle = mode && !strcmp(mode, "idle"), stuck = mode && !strcmp(mode, "stuck");
	struct ctl *c;
	if (ctl_start(dir, MSG_ROLE_GPU_WORKER, NULL, NULL, stuck ? 500 : 0, &c)) {
		fprintf(stderr, "ctl child: %s\n", err_msg());
		_exit(1);
	}
	fprintf(stderr, "ctl child %d up\n", (int)getpid());
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!ctl_shutdown_requested(c)) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		bool silent = stuck && (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > 300;
		if (!silent)
			ctl_heartbeat(c);
		if (idle) {
			struct pollfd p = { .fd = ctl_wake_fd(c), .events = POLLIN };
			poll(&p, 1, 10000);
		} else {
			usleep(10 * 1000);
		}
	}
	fprintf(stderr, "ctl child %d: shutdown\n", (int)getpid());
	ctl_stop(c);
	_exit(0);
}

static char tmp[64], logpath[128];
static int log_fd = -1;

static void setup(void)
{
	snprintf(tmp, sizeof tmp, "/tmp/unicorn-sup-XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	snprintf(logpath, sizeof logpath, "%s/log", tmp);
	log_fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	cr_assert_geq(log_fd, 0);
}

static void teardown(void)
{
	close(log_fd);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (system(cmd)) {}
}

TestSuite(supervisor, .init = setup, .fini = teardown, .timeout = 30);

static char *read_log(void)
{
	static char buf[65536];
	FILE *f = fopen(logpath, "r");
	cr_assert_not_null(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static struct supervisor *make(uint32_t min_ms, uint32_t max_ms, uint32_t reset_ms)
{
	struct sup_opts o = { .rundir = tmp, .log_fd = log_fd, .wake_fd = -1, .backoff_min_ms = min_ms,
			      .backoff_max_ms = max_ms, .reset_ms = reset_ms, .ping_ms = 100, .pong_ms = 700 };
	struct supervisor *s;
	cr_assert_eq(sup_create(&o, &s), 0, "%s", err_msg());
	return s;
}

static void add_sh(struct supervisor *s, const char *name, const char *script, const char *ready)
{
	struct sup_child_spec sp = { 0 };
	snprintf(sp.name, sizeof sp.name, "%s", name);
	sp.argv[0] = "/bin/sh";
	sp.argv[1] = "-c";
	sp.argv[2] = script;
	sp.ready_file = ready;
	cr_assert_eq(sup_add(s, &sp), 0, "%s", err_msg());
}

static void run_for(struct supervisor *s, double seconds)
{
	double end = proc_now_s() + seconds;
	while (proc_now_s() < end)
		cr_assert_geq(sup_step(s, 20), 0, "%s", err_msg());
}

Test(supervisor, restart_with_backoff_and_prefixes)
{
	int fds0 = count_fds();
	struct supervisor *s = make(50, 200, 10000);
	add_sh(s, "flaky", "echo hello from $$; echo partial-line-no-newline >&2; exit 1", NULL);
	cr_assert_eq(sup_start(s), 0, "%s", err_msg());
	run_for(s, 1.3);
	struct sup_child_info ci;
	cr_assert_eq(sup_info(s, 0, &ci), 0);
	/* delays 50, 100, 200, 200, 200, ...: about 6 restarts in 1.3 s */
	cr_assert_geq(ci.restarts, 3, "restarts %u", ci.restarts);
	cr_assert_leq(ci.restarts, 9, "restarts %u (backoff not applied?)", ci.restarts);
	cr_assert_eq(ci.last_exit, 1);
	sup_stop(s, 1000);
	sup_destroy(s);
	cr_assert_eq(count_fds(), fds0, "descriptors leaked");
	const char *log = read_log();
	cr_assert_not_null(strstr(log, "[flaky] hello from "), "%s", log);
	cr_assert_not_null(strstr(log, "[flaky] partial-line-no-newline\n"), "%s", log);
	const char *a = strstr(log, "restarting in 50 ms");
	cr_assert_not_null(a, "%s", log);
	const char *b = strstr(a, "restarting in 100 ms");
	cr_assert_not_null(b, "doubling: %s", log);
	const char *c = strstr(b, "restarting in 200 ms");
	cr_assert_not_null(c, "doubling: %s", log);
	cr_assert_not_null(strstr(c + 1, "restarting in 200 ms"), "capped at max: %s", log);
	cr_assert_null(strstr(log, "restarting in 400 ms"), "cap exceeded: %s", log);
}

Test(supervisor, backoff_resets_after_long_uptime)
{
	struct supervisor *s = make(50, 2000, 150);
	add_sh(s, "slow", "sleep 0.25; exit 1", NULL);
	cr_assert_eq(sup_start(s), 0);
	run_for(s, 1.2);
	sup_stop(s, 1000);
	sup_destroy(s);
	const char *log = read_log();
	cr_assert_null(strstr(log, "restarting in 100 ms"), "backoff must reset: %s", log);
	const char *a = strstr(log, "restarting in 50 ms");
	cr_assert_not_null(a);
	cr_assert_not_null(strstr(a + 1, "restarting in 50 ms"), "%s", log);
}

Test(supervisor, exit2_is_fatal)
{
	struct supervisor *s = make(50, 200, 10000);
	add_sh(s, "first", "exec sleep 100", NULL);
	add_sh(s, "loader", "echo 'model.gguf: bad magic' >&2; exit 2", NULL);
	cr_assert_eq(sup_start(s), 0);
	int ev = SUP_IDLE;
	double end = proc_now_s() + 5;
	while (ev != SUP_FATAL && proc_now_s() < end)
		ev = sup_step(s, 20);
	cr_assert_eq(ev, SUP_FATAL);
	cr_assert_not_null(strstr(sup_fatal_msg(s), "loader"), "%s", sup_fatal_msg(s));
	cr_assert_not_null(strstr(sup_fatal_msg(s), "bad magic"), "%s", sup_fatal_msg(s));
	run_for(s, 0.3);
	struct sup_child_info ci;
	sup_info(s, 1, &ci);
	cr_assert_eq(ci.restarts, 0, "a fatal child is never restarted");
	cr_assert_eq(ci.pid, 0);
	sup_info(s, 0, &ci);
	pid_t first = ci.pid;
	cr_assert_gt(first, 0);
	double t0 = proc_now_s();
	sup_stop(s, 1000);
	cr_assert_lt(proc_now_s() - t0, 1.5);
	sup_info(s, 0, &ci);
	cr_assert_eq(ci.pid, 0);
	cr_assert_eq(kill(first, 0), -1, "child still exists after sup_stop");
	sup_destroy(s);
}

/* 127 is what the dynamic loader exits with when a shared library is missing:
 * no restart can help, so it is fatal like exit 2. */
Test(supervisor, exec_failure_127_is_fatal)
{
	struct supervisor *s = make(50, 200, 10000);
	add_sh(s, "coordinator", "echo 'libfoo.so.1: cannot open shared object file' >&2; exit 127", NULL);
	cr_assert_eq(sup_start(s), 0);
	int ev = SUP_IDLE;
	double end = proc_now_s() + 5;
	while (ev != SUP_FATAL && proc_now_s() < end)
		ev = sup_step(s, 20);
	cr_assert_eq(ev, SUP_FATAL);
	cr_assert_not_null(strstr(sup_fatal_msg(s), "exit status 127"), "%s", sup_fatal_msg(s));
	cr_assert_not_null(strstr(sup_fatal_msg(s), "libfoo.so.1"), "%s", sup_fatal_msg(s));
	run_for(s, 0.3);
	struct sup_child_info ci;
	sup_info(s, 0, &ci);
	cr_assert_eq(ci.restarts, 0, "an exec failure is never restarted");
	sup_destroy(s);
}

Test(supervisor, missing_binary_is_fatal)
{
	struct supervisor *s = make(50, 200, 10000);
	struct sup_child_spec sp = { 0 };
	snprintf(sp.name, sizeof sp.name, "ghost");
	sp.argv[0] = "/nonexistent/unicorn-ghost";
	cr_assert_eq(sup_add(s, &sp), 0);
	cr_assert_eq(sup_start(s), 0);
	int ev = SUP_IDLE;
	double end = proc_now_s() + 5;
	while (ev != SUP_FATAL && proc_now_s() < end)
		ev = sup_step(s, 20);
	cr_assert_eq(ev, SUP_FATAL);
	cr_assert_not_null(strstr(sup_fatal_msg(s), "/nonexistent/unicorn-ghost"), "%s", sup_fatal_msg(s));
	sup_destroy(s);
}

Test(supervisor, start_order_waits_for_ready_file)
{
	char fa[128], fb[128], sa[256], sb[256];
	snprintf(fa, sizeof fa, "%s/a.ready", tmp);
	snprintf(fb, sizeof fb, "%s/b.ready", tmp);
	snprintf(sa, sizeof sa, "sleep 0.4; touch %s; exec sleep 100", fa);
	snprintf(sb, sizeof sb, "test -e %s || echo 'started too early'; exec sleep 100", fa);
	struct supervisor *s = make(50, 200, 10000);
	add_sh(s, "a", sa, fa);
	add_sh(s, "b", sb, NULL);
	cr_assert_eq(sup_start(s), 0);
	struct sup_child_info ci;
	double end = proc_now_s() + 5;
	do {
		cr_assert_geq(sup_step(s, 20), 0);
		sup_info(s, 1, &ci);
		if (ci.pid)
			cr_assert_eq(access(fa, F_OK), 0, "b started before a was ready");
	} while (!ci.pid && proc_now_s() < end);
	cr_assert_gt(ci.pid, 0);
	run_for(s, 0.2);
	sup_stop(s, 1000);
	sup_destroy(s);
	cr_assert_null(strstr(read_log(), "started too early"));
}

static pid_t start_ctl_child(struct supervisor *s, const char *mode);

Test(supervisor, watchdog_replaces_stopped_child, .timeout = 40)
{
	struct supervisor *s = make(50, 200, 10000);
	start_ctl_child(s, "beat"); /* waits for its STATUS row */
	struct sup_child_info ci;
	sup_info(s, 0, &ci);
	cr_assert_eq(ci.status.role, MSG_ROLE_GPU_WORKER);
	double end;
	run_for(s, 0.5); /* beats: no kill */
	sup_info(s, 0, &ci);
	cr_assert_eq(ci.watchdog_kills, 0);
	cr_assert_eq(ci.restarts, 0);
	pid_t old = ci.pid;
	cr_assert_eq(kill(old, SIGSTOP), 0);
	double t0 = proc_now_s();
	end = t0 + 6;
	do {
		cr_assert_geq(sup_step(s, 20), 0);
		sup_info(s, 0, &ci);
	} while ((ci.pid == old || ci.pid == 0) && proc_now_s() < end);
	double took = proc_now_s() - t0;
	cr_assert_neq(ci.pid, old, "stopped child not replaced: %s", read_log());
	cr_assert_gt(ci.pid, 0);
	cr_assert_eq(ci.watchdog_kills, 1);
	cr_assert_eq(ci.restarts, 1);
	cr_assert_geq(took, 0.6, "killed before the PONG deadline (%.2f s)", took);
	cr_assert_lt(took, 3.0, "took %.2f s", took);
	cr_assert_eq(kill(old, 0), -1, "the stopped child must be gone");
	/* Graceful stop goes through SHUTDOWN on the control link: exit 0. */
	end = proc_now_s() + 10;
	do {
		cr_assert_geq(sup_step(s, 20), 0);
		sup_info(s, 0, &ci);
	} while (!ci.have_status && proc_now_s() < end);
	double ts = proc_now_s();
	sup_stop(s, 3000);
	sup_info(s, 0, &ci);
	cr_assert_eq(ci.last_exit, 0, "SHUTDOWN should end it with status 0 (got %d)", ci.last_exit);
	cr_assert_lt(proc_now_s() - ts, 0.6, "SHUTDOWN path should beat the SIGTERM fallback");
	sup_destroy(s);
	cr_assert_not_null(strstr(read_log(), "[gpu] ctl child"));
}

static pid_t start_ctl_child(struct supervisor *s, const char *mode)
{
	setenv("UNICORN_TEST_CTL_CHILD", tmp, 1);
	setenv("UNICORN_TEST_CTL_MODE", mode, 1);
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	cr_assert_gt(n, 0);
	self[n] = 0;
	struct sup_child_spec sp = { 0 };
	snprintf(sp.name, sizeof sp.name, "gpu");
	sp.role = MSG_ROLE_GPU_WORKER;
	sp.argv[0] = self;
	cr_assert_eq(sup_add(s, &sp), 0, "%s", err_msg());
	cr_assert_eq(sup_start(s), 0);
	struct sup_child_info ci;
	double end = proc_now_s() + 10;
	do {
		cr_assert_geq(sup_step(s, 20), 0);
		sup_info(s, 0, &ci);
	} while (!ci.have_status && proc_now_s() < end);
	unsetenv("UNICORN_TEST_CTL_MODE");
	cr_assert(ci.have_status, "no STATUS row from the child's page: %s", read_log());
	cr_assert_eq(ci.status.pid, (uint32_t)ci.pid);
	return ci.pid;
}

/* Voluntary context switches of every thread of pid: how often it woke. */
static long wakeups(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	cr_assert_not_null(d);
	long sum = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p2[320], line[128];
		snprintf(p2, sizeof p2, "/proc/%d/task/%s/status", (int)pid, e->d_name);
		FILE *f = fopen(p2, "r");
		if (!f)
			continue;
		long v;
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
				sum += v;
		fclose(f);
	}
	closedir(d);
	return sum;
}

/* The watchdog reads an idle child's page: it never wakes the child (issue
 * 28: the old ping/status probes woke every process 3 times a second, each
 * with several threads), and SHUTDOWN still reaches it at once. */
Test(supervisor, watchdog_does_not_wake_an_idle_child, .timeout = 40)
{
	struct supervisor *s = make(50, 200, 10000); /* ticks every 100 ms */
	pid_t kid = start_ctl_child(s, "idle");
	run_for(s, 0.5); /* settled */
	long before = wakeups(kid);
	run_for(s, 2.0);
	long woke = wakeups(kid) - before;
	fprintf(stderr, "supervisor: an idle child woke %ld times in 2 s of watchdog ticks every 100 ms\n", woke);
	cr_assert_leq(woke, 3, "the watchdog woke an idle child %ld times in 2 s", woke);
	struct sup_child_info ci;
	sup_info(s, 0, &ci);
	cr_assert_eq(ci.watchdog_kills, 0);
	double ts = proc_now_s();
	sup_stop(s, 3000);
	sup_info(s, 0, &ci);
	cr_assert_eq(ci.last_exit, 0, "SHUTDOWN should end it with status 0 (got %d)", ci.last_exit);
	cr_assert_lt(proc_now_s() - ts, 0.6, "SHUTDOWN must wake a child asleep in poll");
	sup_destroy(s);
}

/* A child whose main loop stops beating (alive, its ctl thread fine) is
 * replaced once its own stall limit passes. */
Test(supervisor, watchdog_replaces_a_stuck_main_loop, .timeout = 40)
{
	struct supervisor *s = make(50, 200, 10000);
	pid_t kid = start_ctl_child(s, "stuck");
	double t0 = proc_now_s();
	struct sup_child_info ci;
	do {
		cr_assert_geq(sup_step(s, 20), 0);
		sup_info(s, 0, &ci);
	} while ((ci.pid == kid || ci.pid == 0) && proc_now_s() < t0 + 6);
	cr_assert_neq(ci.pid, kid, "a stuck child was not replaced: %s", read_log());
	cr_assert_geq(ci.watchdog_kills, 1);
	cr_assert_not_null(strstr(read_log(), "main loop stuck"));
	sup_stop(s, 1000);
	sup_destroy(s);
}
