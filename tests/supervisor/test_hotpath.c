/* hotpath: the cluster's data plane seen from outside (issue 13). A real
 * cluster (bin/unicorn-up on the tiny golden model):
 *   - idle for 10 s, all its processes together use < 1% of one core
 *     (CPU time from each thread's /proc schedstat, nanoseconds);
 *   - a worker killed under 4 concurrent streaming HTTP requests: every
 *     stream gives the uninterrupted text, and its worst gap between two
 *     chunks stays within the uninterrupted run's worst gap + 3 s (death is
 *     noticed at once, not by a step timeout).
 *   - the coordinator killed under 4 HTTP requests (streamed and not): each
 *     completes with the uninterrupted text (the API process re-submits);
 *   - the API process killed under 4 streams: they end at once, the CLI is
 *     still served, HTTP is back within 2 s.
 * Needs UNICORN_BIN (make test). Takes the cluster tests' lock. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/golden.h"
#include "tests/proc.h"
#include "tests/streams.h"

#define N_STREAMS STREAMS_N
#define MAX_TOKENS 40

/* unicorn-up and its children. */
static int cluster_pids(const struct proc_cluster *c, pid_t *out, int cap)
{
	out[0] = c->sup;
	return 1 + proc_children(c->sup, out + 1, cap - 1);
}

/* CPU nanoseconds of every thread of pid so far. */
static uint64_t cpu_ns(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	uint64_t sum = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p2[320];
		snprintf(p2, sizeof p2, "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
		FILE *f = fopen(p2, "r");
		unsigned long long ns = 0;
		if (f) {
			if (fscanf(f, "%llu", &ns) != 1)
				ns = 0;
			fclose(f);
		}
		sum += ns;
	}
	closedir(d);
	return sum;
}

Test(hotpath, idle_cluster_sleeps, .timeout = 180)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "hot", (const char *const[]){ "--placement", "split", NULL });
	/* one request first, so every process has done real work and settled */
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --max-tokens 4 hello >/dev/null", proc_bin_dir(), c.name);
	cr_assert_eq(system(cmd), 0);
	sleep(2);
	pid_t pids[16];
	int n = cluster_pids(&c, pids, 16);
	cr_assert_geq(n, 5, "unicorn-up and its 4 children (found %d)", n);
	uint64_t before[16], total = 0;
	for (int i = 0; i < n; i++)
		before[i] = cpu_ns(pids[i]);
	const double secs = 10;
	usleep((useconds_t)(secs * 1e6));
	for (int i = 0; i < n; i++) {
		uint64_t d = cpu_ns(pids[i]) - before[i];
		char comm[64] = "?", path[64];
		snprintf(path, sizeof path, "/proc/%d/comm", (int)pids[i]);
		FILE *f = fopen(path, "r");
		if (f) {
			if (fgets(comm, sizeof comm, f))
				comm[strcspn(comm, "\n")] = 0;
			fclose(f);
		}
		fprintf(stderr, "hotpath: idle %-16s pid %-7d %6.2f ms of CPU in %.0f s (%.3f%% of a core)\n", comm,
			(int)pids[i], d / 1e6, secs, d / 1e7 / secs);
		total += d;
	}
	double share = total / 1e9 / secs;
	fprintf(stderr, "hotpath: idle split cluster: %.3f%% of one core over %.0f s (%d processes)\n",
		share * 100, secs, n);
	cr_assert_lt(share, 0.01, "an idle cluster used %.2f%% of a core", share * 100);
	/* still serving after the idle spell */
	cr_assert_eq(system(cmd), 0);
	proc_cluster_stop(&c);
}

static void kill_under_streams(const char *placement, const char *victim, bool streamed)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "hot", (const char *const[]){ "--placement", placement, NULL });
	struct stream base[N_STREAMS], hit[N_STREAMS];
	streams_run(&c, base, NULL, NULL, streamed, MAX_TOKENS, NULL);
	streams_run(&c, hit, streams_child_of, victim, streamed, MAX_TOKENS, NULL);
	double worst_base = 0, worst_hit = 0;
	for (int i = 0; i < N_STREAMS; i++) {
		cr_assert(answer_complete(&base[i], streamed), "answer %d incomplete:\n%s", i, base[i].body);
		cr_assert(answer_complete(&hit[i], streamed), "answer %d after the kill incomplete:\n%s", i,
			  hit[i].body);
		char *a = stream_text(&base[i]), *b = stream_text(&hit[i]);
		cr_assert_gt(strlen(a), 0);
		cr_assert_str_eq(b, a, "stream %d: text changed by the kill of %s", i, victim);
		free(a);
		free(b);
		worst_base = base[i].worst_gap > worst_base ? base[i].worst_gap : worst_base;
		worst_hit = hit[i].worst_gap > worst_hit ? hit[i].worst_gap : worst_hit;
		free(base[i].body);
		free(hit[i].body);
	}
	fprintf(stderr, "hotpath: %s: kill %s under %d HTTP %s: worst gap %.3f s (uninterrupted %.3f s)\n",
		placement, victim, N_STREAMS, streamed ? "streams" : "requests", worst_hit, worst_base);
	cr_assert_leq(worst_hit, worst_base + 3.0, "worst gap %.2f s after killing %s (uninterrupted %.2f s)",
		      worst_hit, victim, worst_base);
	proc_cluster_stop(&c);
}

Test(hotpath, fused_gpu_worker_killed_under_http_streams, .timeout = 240)
{
	kill_under_streams("fused", "unicorn-gpu-worker", true);
}

Test(hotpath, split_workers_killed_under_http_streams, .timeout = 300)
{
	/* the attention worker dies under wide micro-batches (decode rows on
	 * the mat-mat kernels, UNICORN_BATCH_MM_MIN=2): the replay recomputes
	 * them wide; the gpu worker under rows run as lone tokens */
	setenv("UNICORN_BATCH_MM_MIN", "2", 1);
	kill_under_streams("split", "unicorn-npu-worker", true);
	unsetenv("UNICORN_BATCH_MM_MIN");
	kill_under_streams("split", "unicorn-gpu-worker", true);
}

/* The HTTP server is its own process (issue 14): a coordinator crash is
 * survived by the clients, streamed or not, with the uninterrupted text. */
Test(hotpath, coordinator_killed_under_http_requests, .timeout = 300)
{
	kill_under_streams("fused", "unicorn-coordinator", true);
	kill_under_streams("fused", "unicorn-coordinator", false);
}

/* HTTP status of one small completion on port, -1 when it cannot connect. */
static int try_request(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	const char *body = "{\"prompt\":\"hi\",\"max_tokens\":2}";
	char req[256], ans[512] = { 0 };
	int k = snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
	int st = -1;
	if (send(fd, req, (size_t)k, MSG_NOSIGNAL) == k && recv(fd, ans, sizeof ans - 1, MSG_WAITALL) > 12)
		sscanf(ans, "HTTP/1.%*d %d", &st);
	close(fd);
	return st;
}

/* A crash of the API process ends its connections at once (the clients see
 * the stream end without [DONE]), the CLI keeps being served, and HTTP is
 * back within 5 s: 0.4-0.9 s alone on the 2-core CI machine, up to 2.2 s with
 * the rest of the suite beside it (the restarted process reloads the 262k
 * token vocabulary). The CLI runs beside the HTTP polls, at the lowest
 * priority, so its lavapipe threads do not starve the restart. */
Test(hotpath, api_killed_under_http_streams, .timeout = 180)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "hot", (const char *const[]){ "--placement", "fused", NULL });
	struct stream s[N_STREAMS];
	double t_kill = 0;
	streams_run(&c, s, streams_child_of, "unicorn-api", true, 2000, &t_kill);
	cr_assert_gt(t_kill, 0);
	for (int i = 0; i < N_STREAMS; i++) {
		cr_assert_null(strstr(s[i].body, "[DONE]"), "stream %d completed although its server died", i);
		cr_assert_lt(s[i].t_end - t_kill, 0.5, "stream %d ended %.2f s after the kill", i,
			     s[i].t_end - t_kill);
		free(s[i].body);
	}
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --max-tokens 4 hello >/dev/null", proc_bin_dir(), c.name);
	pid_t cli = fork();
	cr_assert_geq(cli, 0);
	if (cli == 0) {
		if (setpriority(PRIO_PROCESS, 0, 19) != 0)
			_exit(2);
		_exit(system(cmd) == 0 ? 0 : 1);
	}
	int st = -1;
	while (st != 200 && proc_now_s() - t_kill < 10) {
		st = try_request(c.port);
		if (st != 200)
			usleep(50000);
	}
	double back = proc_now_s() - t_kill;
	int wst = 0;
	cr_assert_eq(waitpid(cli, &wst, 0), cli);
	cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the CLI is served while the API process is down");
	fprintf(stderr, "hotpath: API process killed under %d streams: streams ended at once, HTTP back after %.2f s\n",
		N_STREAMS, back);
	cr_assert_eq(st, 200, "no HTTP answer 10 s after the API process died");
	cr_assert_lt(back, 5.0, "HTTP back after %.2f s", back);
	proc_cluster_stop(&c);
}

/* Split placement's dataflow gives the greedy text of fused placement: with
 * one micro-batch (unicorn-up's choice when both workers share a device, as
 * here: the coordinator's log says so), two (the default on two devices) and
 * four (UNICORN_SPLIT_MBS). */
Test(hotpath, split_micro_batches_equal_fused, .timeout = 480)
{
	/* 0: fused; 1, 2, 3: split with 1 (unicorn-up's choice here), 2 and 4
	 * micro-batches (rows as lone tokens); 4, 5: fused and split (2
	 * micro-batches) with UNICORN_BATCH_MM_MIN=2, so decode rows run wide (the
	 * mat-mat kernels) in both, as FLOWs in split */
	enum { N_RUNS = 6 };
	static struct stream s[N_RUNS][N_STREAMS];
	const char *placement[N_RUNS] = { "fused", "split", "split", "split", "fused", "split" };
	const char *mbs[N_RUNS] = { NULL, NULL, "2", "4", NULL, "2" };
	for (int k = 0; k < N_RUNS; k++) {
		if (mbs[k])
			setenv("UNICORN_SPLIT_MBS", mbs[k], 1);
		else
			unsetenv("UNICORN_SPLIT_MBS");
		if (k == 4)
			setenv("UNICORN_BATCH_MM_MIN", "2", 1);
		struct proc_cluster c;
		proc_cluster_start(&c, "hot", (const char *const[]){ "--placement", placement[k], NULL });
		streams_run(&c, s[k], NULL, NULL, true, MAX_TOKENS, NULL);
		if (k == 1)
			cr_assert(proc_log_has(c.log, "split: decoding sequences in 1 micro-batch"),
				  "split on one device did not run one micro-batch (log %s)", c.log);
		if (k == 2)
			cr_assert(proc_log_has(c.log, "split: decoding sequences in 2 micro-batches"), "log %s", c.log);
		proc_cluster_stop(&c);
	}
	unsetenv("UNICORN_SPLIT_MBS");
	unsetenv("UNICORN_BATCH_MM_MIN");
	for (int i = 0; i < N_STREAMS; i++) {
		char *text[N_RUNS];
		for (int k = 0; k < N_RUNS; k++) {
			cr_assert(answer_complete(&s[k][i], true), "run %d stream %d incomplete", k, i);
			text[k] = stream_text(&s[k][i]);
		}
		cr_assert_gt(strlen(text[0]), 0);
		cr_assert_str_eq(text[1], text[0], "stream %d: split (1 micro-batch) and fused differ", i);
		cr_assert_str_eq(text[2], text[0], "stream %d: split (2 micro-batches) and fused differ", i);
		cr_assert_str_eq(text[3], text[0], "stream %d: split (4 micro-batches) and fused differ", i);
		cr_assert_str_eq(text[5], text[4], "stream %d: wide split and wide fused differ", i);
		for (int k = 0; k < N_RUNS; k++) {
			free(text[k]);
			free(s[k][i].body);
		}
	}
}
