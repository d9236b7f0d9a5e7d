/* scale: replicas behind a real load balancer (issue 34, docs/scale.md).
 *
 * Two clusters on the tiny golden model, Debian's HAProxy in front with the
 * configuration of docs/scale.md (read out of it; only its three loopback
 * ports are replaced by free ones), on loopback. Eight greedy streaming
 * completions are kept in flight through HAProxy (each its own conversation
 * header, so the hash spreads them) for ~20 s, while
 *   1. cluster a is drained (`unicorn down --drain`) and started again, then
 *   2. cluster b's unicorn-up is killed with SIGKILL (its processes die with
 *      it) and started again.
 * Counted and asserted: no request that started after the drain began fails
 * (HAProxy retries a draining or stopped replica's 503 and refused
 * connections elsewhere); every request in flight on a when its drain began
 * finishes; a request that was running on b when b was killed ends with an
 * error (an incomplete stream), never a hang; every other request completes
 * with exactly the text of an uninterrupted run (greedy). The counts go to
 * the log.
 *
 * Its own wall time is ~30 s (on this project's 2-core VM, with other
 * work beside it); the timeouts also cover waiting for the cluster lock,
 * which another cluster test may hold for minutes.
 *
 * Needs UNICORN_BIN (set by `make test`) and haproxy (setup.sh installs it). */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/proc.h"
#include "tests/scale/scale_util.h"

#define N_STREAMS 8
#define N_PROMPTS 4
#define MAX_TOKENS 24
#define LOOP_S 20.0
#define DRAIN_AT_S 3.0
#define REQ_MAX_S 30 /* curl --max-time: a request still running then hangs */

static const char *const prompts[N_PROMPTS] = { "Once upon a time", "The quick brown fox jumps", "Hello world",
						"In the beginning" };

/* Debian's haproxy is in /usr/sbin (not on a user's PATH); else PATH's.
 * Asserted present: setup.sh installs it. */
static const char *haproxy_bin(void)
{
	static char path[512];
	if (!access("/usr/sbin/haproxy", X_OK))
		return "/usr/sbin/haproxy";
	cr_assert_eq(proc_sh("command -v haproxy", path, sizeof path), 0,
		     "haproxy is not installed (setup.sh installs Debian's haproxy)");
	path[strcspn(path, "\n")] = 0;
	return path;
}

/* The ```LANG block of docs/scale.md (asserted present), malloc'ed. */
static char *doc_block(const char *lang)
{
	FILE *f = fopen("docs/scale.md", "r");
	cr_assert_not_null(f, "docs/scale.md: %s (tests run from the repository root)", strerror(errno));
	static char doc[65536];
	size_t n = fread(doc, 1, sizeof doc - 1, f);
	fclose(f);
	doc[n] = 0;
	char open[32];
	snprintf(open, sizeof open, "```%s\n", lang);
	const char *b = strstr(doc, open);
	cr_assert_not_null(b, "docs/scale.md has no ```%s block", lang);
	b += strlen(open);
	const char *e = strstr(b, "\n```");
	cr_assert_not_null(e, "docs/scale.md: the ```%s block does not end", lang);
	return strndup(b, (size_t)(e - b) + 1);
}

/* Replace the one occurrence of what in *s by with (asserting exactly one). */
static void replace_once(char **s, const char *what, const char *with)
{
	char *p = strstr(*s, what);
	cr_assert_not_null(p, "docs/scale.md's configuration has no %s", what);
	cr_assert_null(strstr(p + 1, what), "docs/scale.md's configuration has %s twice", what);
	size_t a = (size_t)(p - *s), wl = strlen(what), nl = strlen(with), tl = strlen(*s);
	char *r = malloc(tl - wl + nl + 1);
	memcpy(r, *s, a);
	memcpy(r + a, with, nl);
	memcpy(r + a + nl, p + wl, tl - a - wl + 1);
	free(*s);
	*s = r;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

Test(scale, docs_configurations_are_valid, .timeout = 60)
{
	char out[4096];
	const char *haproxy = haproxy_bin();
	char tmp[] = "/tmp/unicorn-scalecfg-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	char path[300], cmd[700];
	char *cfg = doc_block("haproxy");
	snprintf(path, sizeof path, "%s/haproxy.cfg", tmp);
	write_file(path, cfg);
	free(cfg);
	snprintf(cmd, sizeof cmd, "%s -c -f %s", haproxy, path);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "docs/scale.md's haproxy configuration: %s", out);
	/* Prometheus comes with setup.sh too: its scrape configuration */
	if (proc_sh("command -v promtool", out, sizeof out) == 0) {
		char *y = doc_block("yaml");
		snprintf(path, sizeof path, "%s/prometheus.yml", tmp);
		write_file(path, y);
		free(y);
		snprintf(cmd, sizeof cmd, "promtool check config %s", path);
		cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "docs/scale.md's Prometheus configuration: %s", out);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (system(cmd)) {}
}

/* Wait (up to 90 s) for the processes in pids[n] to be gone. */
static void wait_gone(const pid_t *pids, int n)
{
	double end = proc_now_s() + 90;
	for (int i = 0; i < n; i++)
		while (kill(pids[i], 0) == 0 || errno != ESRCH) {
			cr_assert_lt(proc_now_s(), end, "pid %d outlived its killed supervisor", (int)pids[i]);
			usleep(20 * 1000);
		}
}

enum { ST_STEADY, ST_DRAINING, ST_A_STARTING, ST_A_RISING, ST_B_STARTING, ST_DONE };

struct counts {
	int started, after_drain, right, wrong, cut_on_b, hangs, failed_other;
	int inflight_a_at_drain, inflight_a_finished, inflight_b_at_kill;
	int by_a, by_b;
};

Test(scale, haproxy_drain_and_kill_lose_no_request, .timeout = 600)
{
	proc_bin_dir_or_skip();
	char out[8192];
	char haproxy[512];
	snprintf(haproxy, sizeof haproxy, "%s", haproxy_bin());
	double t_lock = proc_now_s();
	int lock = proc_cluster_lock();
	double t_begin = proc_now_s();
	fprintf(stderr, "scale: cluster lock after %.1f s\n", t_begin - t_lock);
	char tmp[] = "/tmp/unicorn-scale-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	setenv("XDG_RUNTIME_DIR", tmp, 1);
	unsetenv("UNICORN_API_KEY");
	int pa = proc_free_port(), pb = proc_free_port(), pf = proc_free_port();
	while (pb == pa)
		pb = proc_free_port();
	while (pf == pa || pf == pb)
		pf = proc_free_port();

	struct su_cluster a, b;
	su_start(&a, tmp, "a", pa, NULL);
	su_start(&b, tmp, "b", pb, NULL);
	double end = proc_now_s() + 90;
	while (!su_ready(&a) || !su_ready(&b) || su_get(pa, "/health", NULL, 0) != 200 ||
	       su_get(pb, "/health", NULL, 0) != 200) {
		cr_assert_lt(proc_now_s(), end, "clusters not ready (/health 200) within 90 s");
		usleep(50 * 1000);
	}

	fprintf(stderr, "scale: both clusters ready after %.1f s\n", proc_now_s() - t_begin);
	/* /health reports the load */
	char body[1024];
	cr_assert_eq(su_get(pa, "/health", body, sizeof body), 200, "%s", body);
	json_t *hj = json_loads(body, 0, NULL);
	cr_assert_not_null(hj, "/health: %s", body);
	cr_assert_str_eq(json_string_value(json_object_get(hj, "status")), "ok");
	cr_assert_eq(json_integer_value(json_object_get(hj, "slots")), 4, "/health: %s", body);
	cr_assert(json_is_integer(json_object_get(hj, "running")) && json_is_integer(json_object_get(hj, "queued")),
		  "/health: %s", body);
	json_decref(hj);

	/* HAProxy with docs/scale.md's configuration */
	char *cfg = doc_block("haproxy");
	char addr[64];
	snprintf(addr, sizeof addr, "127.0.0.1:%d", pf);
	replace_once(&cfg, "127.0.0.1:8080", addr);
	snprintf(addr, sizeof addr, "127.0.0.1:%d", pa);
	replace_once(&cfg, "127.0.0.1:8642", addr);
	snprintf(addr, sizeof addr, "127.0.0.1:%d", pb);
	replace_once(&cfg, "127.0.0.1:8643", addr);
	char cfg_path[300], hlog[300];
	snprintf(cfg_path, sizeof cfg_path, "%s/haproxy.cfg", tmp);
	snprintf(hlog, sizeof hlog, "%s/haproxy.log", tmp);
	write_file(cfg_path, cfg);
	free(cfg);
	char *hargv[] = { haproxy, "-db", "-f", cfg_path, NULL };
	pid_t hap = proc_spawn(hargv, hlog);
	end = proc_now_s() + 10;
	while (su_get(pf, "/health", NULL, 0) != 200) {
		int st;
		if (waitpid(hap, &st, WNOHANG) == hap) {
			proc_tail(hlog, 20);
			cr_assert_fail("haproxy exited (status %d)", st);
		}
		cr_assert_lt(proc_now_s(), end, "haproxy did not answer /health within 10 s");
		usleep(50 * 1000);
	}

	/* the uninterrupted answers, from each cluster directly: the same text */
	static char ref[N_PROMPTS][4096];
	{
		struct su_req r[2 * N_PROMPTS];
		for (int i = 0; i < 2 * N_PROMPTS; i++)
			su_req_start(&r[i], tmp, 100 + i, i < N_PROMPTS ? pa : pb, prompts[i % N_PROMPTS], MAX_TOKENS,
				     NULL, 60);
		for (int i = 0; i < 2 * N_PROMPTS; i++) {
			int st = proc_wait_ms(r[i].pid, 90000);
			cr_assert_eq(st, 0, "reference request %d: curl status %d", i, st);
			struct su_answer an;
			su_req_read(&r[i], &an);
			cr_assert(an.done && an.status == 200, "reference request %d: status %d, %s", i, an.status,
				  an.error);
			if (i < N_PROMPTS)
				snprintf(ref[i], sizeof ref[i], "%s", an.text);
			else
				cr_assert_str_eq(an.text, ref[i - N_PROMPTS], "cluster b's answer to '%s' is not a's",
						 prompts[i - N_PROMPTS]);
		}
	}

	fprintf(stderr, "scale: haproxy up, uninterrupted answers taken after %.1f s\n", proc_now_s() - t_begin);
	struct su_req s[N_STREAMS];
	memset(s, 0, sizeof s);
	struct counts n = { 0 };
	int state = ST_STEADY;
	pid_t down = 0, b_kids[16];
	int n_b_kids = 0;
	double t0 = proc_now_s(), t_drain = 0, t_health503 = 0, t_a_stopped = 0, t_a_ready = 0, t_a_back = 0;
	double t_kill = 0, t_b_back = 0;
	char drain_body[256] = "";
	for (;;) {
		double now = proc_now_s();
		bool looping = now - t0 < LOOP_S || state != ST_DONE;
		cr_assert_lt(now - t0, 120.0, "the drain and kill sequence did not end within 120 s (state %d)", state);
		/* requests that ended; new ones while the loop runs */
		int in_flight = 0;
		for (int i = 0; i < N_STREAMS; i++) {
			if (s[i].pid) {
				int st;
				if (waitpid(s[i].pid, &st, WNOHANG) != s[i].pid) {
					in_flight++;
					continue;
				}
				s[i].pid = 0;
				s[i].t1 = proc_now_s();
				struct su_answer an;
				su_req_read(&s[i], &an);
				bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && an.status == 200 && an.done;
				bool after = t_drain && s[i].t0 >= t_drain;
				bool on_a_at_drain = t_drain && s[i].t0 < t_drain && !strcmp(an.replica, "a");
				bool across_kill = t_kill && s[i].t0 < t_kill && s[i].t1 > t_kill;
				n.after_drain += after;
				n.by_a += !strcmp(an.replica, "a");
				n.by_b += !strcmp(an.replica, "b");
				if (on_a_at_drain)
					n.inflight_a_at_drain++;
				if (across_kill && !strcmp(an.replica, "b"))
					n.inflight_b_at_kill++;
				if (ok && !strcmp(an.text, ref[s[i].prompt])) {
					n.right++;
					n.inflight_a_finished += on_a_at_drain;
				} else if (ok) {
					n.wrong++;
					fprintf(stderr, "scale: WRONG answer to '%s' from %s:\n  %s\nwant\n  %s\n",
						prompts[s[i].prompt], an.replica, an.text, ref[s[i].prompt]);
				} else if (WIFEXITED(st) && WEXITSTATUS(st) == 28) {
					n.hangs++;
					fprintf(stderr, "scale: HANG: a request to %s ran past %d s\n", an.replica, REQ_MAX_S);
				} else if (across_kill && !strcmp(an.replica, "b")) {
					n.cut_on_b++; /* it ran on b when b was killed: a clean error */
				} else {
					n.failed_other++;
					fprintf(stderr, "scale: FAILED request to %s ('%s', %.2f-%.2f s, drain at %.2f, kill at "
						"%.2f): curl status %d, HTTP %d, %s%s\n", an.replica[0] ? an.replica : "?",
						prompts[s[i].prompt], s[i].t0 - t0, s[i].t1 - t0, t_drain ? t_drain - t0 : -1,
						t_kill ? t_kill - t0 : -1, WIFEXITED(st) ? WEXITSTATUS(st) : -1, an.status,
						an.error, an.done ? "" : " (no [DONE])");
				}
			}
			if (!s[i].pid && looping) {
				char conv[32];
				snprintf(conv, sizeof conv, "conv-%d", i);
				s[i].prompt = (i + n.started) % N_PROMPTS;
				su_req_start(&s[i], tmp, i, pf, prompts[s[i].prompt], MAX_TOKENS, conv, REQ_MAX_S);
				n.started++;
				in_flight++;
			}
		}
		if (!looping && !in_flight)
			break;
		/* the sequence: drain a, start it again, kill b, start it again */
		now = proc_now_s();
		if (state == ST_STEADY && now - t0 >= DRAIN_AT_S) {
			char name[] = "a", tmo[] = "20";
			char dn[512];
			snprintf(dn, sizeof dn, "%s/unicorn", proc_bin_dir());
			char *dargv[] = { dn, "down", "--name", name, "--drain", "--timeout", tmo, NULL };
			char derr[300];
			snprintf(derr, sizeof derr, "%s/down-a.log", tmp);
			t_drain = proc_now_s();
			down = proc_spawn(dargv, derr);
			state = ST_DRAINING;
		} else if (state == ST_DRAINING) {
			if (!t_health503) {
				char hb[256];
				int hs = su_get(pa, "/health", hb, sizeof hb);
				if (hs == 503) {
					t_health503 = proc_now_s();
					snprintf(drain_body, sizeof drain_body, "%s", hb);
				}
			}
			int st;
			if (waitpid(down, &st, WNOHANG) == down) {
				cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unicorn down --drain: status %d", st);
				cr_assert_eq(proc_wait_ms(a.sup, 10000) >= 0, true, "a's unicorn-up still runs after down");
				t_a_stopped = proc_now_s();
				cr_assert_neq(t_health503, 0.0, "a's /health never said 503 while it drained");
				su_start(&a, tmp, "a", pa, NULL);
				state = ST_A_STARTING;
			}
		} else if (state == ST_A_STARTING) {
			if (su_ready(&a) && su_get(pa, "/health", NULL, 0) == 200) {
				t_a_ready = proc_now_s();
				state = ST_A_RISING;
			}
		} else if (state == ST_A_RISING && now - t_a_ready >= 2.0) {
			/* HAProxy has a back (rise 2 × downinter 0.5 s): kill b's supervisor */
			t_a_back = t_a_ready;
			n_b_kids = proc_children(b.sup, b_kids, 16);
			t_kill = proc_now_s();
			cr_assert_eq(kill(b.sup, SIGKILL), 0);
			cr_assert_geq(proc_wait_ms(b.sup, 5000), 0);
			wait_gone(b_kids, n_b_kids); /* its port is free again */
			su_start(&b, tmp, "b", pb, NULL);
			state = ST_B_STARTING;
		} else if (state == ST_B_STARTING) {
			if (su_ready(&b) && su_get(pb, "/health", NULL, 0) == 200) {
				t_b_back = proc_now_s();
				state = ST_DONE;
			}
		}
		usleep(20 * 1000);
	}
	double wall = proc_now_s() - t_begin;
	fprintf(stderr,
		"scale: %d requests through haproxy in %.1f s (%d started after the drain began; %d served by a, %d by "
		"b): %d right, %d wrong, %d cut on b when it was killed (clean errors; %d were running on b then), "
		"%d hangs, %d other failures; a: /health 503 after %.2f s (%s), drained and stopped in %.2f s with "
		"%d of its %d running requests finished, back after %.2f s; b: back %.2f s after SIGKILL; test "
		"%.1f s\n",
		n.started, proc_now_s() - t0, n.after_drain, n.by_a, n.by_b, n.right, n.wrong, n.cut_on_b,
		n.inflight_b_at_kill, n.hangs, n.failed_other, t_health503 - t_drain, drain_body,
		t_a_stopped - t_drain, n.inflight_a_finished, n.inflight_a_at_drain, t_a_back - t_a_stopped,
		t_b_back - t_kill, wall);
	cr_assert_eq(n.wrong, 0, "%d requests completed with a wrong text", n.wrong);
	cr_assert_eq(n.hangs, 0, "%d requests hung", n.hangs);
	cr_assert_eq(n.failed_other, 0, "%d requests failed that were not running on the killed cluster",
		     n.failed_other);
	cr_assert_eq(n.inflight_a_finished, n.inflight_a_at_drain, "a request running on a when it drained failed");
	cr_assert_gt(n.inflight_a_at_drain, 0, "no request was running on a when it drained (nothing was tested)");
	/* enough happened to mean something (a loaded CI machine runs fewer) */
	cr_assert_geq(n.after_drain, N_STREAMS / 2, "too few requests after the drain began");
	cr_assert_geq(n.right, N_STREAMS, "too few requests completed");
	/* from starting `unicorn down` (a process, its dial) to /health's 503 */
	cr_assert_lt(t_health503 - t_drain, 3.0, "/health took %.2f s to say draining", t_health503 - t_drain);
	cr_assert(strstr(drain_body, "\"draining\""), "a's /health while draining: %s", drain_body);

	/* HAProxy, then both clusters */
	kill(hap, SIGTERM);
	if (proc_wait_ms(hap, 5000) < 0) {
		kill(hap, SIGKILL);
		waitpid(hap, NULL, 0);
	}
	char cmd[600];
	struct su_cluster *cs[2] = { &a, &b };
	for (int i = 0; i < 2; i++) {
		snprintf(cmd, sizeof cmd, "%s/unicorn down --name %s", proc_bin_dir(), cs[i]->name);
		cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
		cr_assert_geq(proc_wait_ms(cs[i]->sup, 15000), 0, "unicorn-up %s still running", cs[i]->name);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (system(cmd)) {}
	close(lock);
}
