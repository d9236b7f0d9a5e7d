/* obs: observability of a real cluster (bin/unicorn-up, split placement, on
 * the tiny golden model) while it generates:
 *   - GET /metrics passes `promtool check metrics` (Debian `prometheus`) and
 *     counts the tokens, per-worker busy time and the latency histograms;
 *   - `unicorn top` runs in a detached tmux session (Debian `tmux`) and its
 *     screen changes during a generation (tokens counter);
 *   - `unicorn top --once` prints a frame with both workers;
 *   - `unicorn trace --seconds 2` writes a Chrome trace with X events of
 *     several layers on both workers;
 *   - the web dashboard draws live data in headless Chromium
 *     (tests/dashboard_check.mjs, npm playwright-core; screenshot in
 *     build/artifacts/dashboard.png).
 *
 * Needs UNICORN_BIN (set by `make test`). Takes the cluster tests' file lock. */
#include <criterion/criterion.h>

#include "tests/proc.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "api/dashboard.h"
#include "tests/golden.h"
#include "common/err.h"

#define PROMPT "Once upon a time"

/* tmux server of the `unicorn top` checks */
static char tmux_name[32];

static void start(struct proc_cluster *c)
{
	proc_cluster_start(c, "obs", (const char *const[]){ "--placement", "split", NULL });
	snprintf(tmux_name, sizeof tmux_name, "unicorn-obs-%d", (int)getpid());
}

static void stop(struct proc_cluster *c)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "tmux -L %s kill-server 2>/dev/null", tmux_name);
	if (system(cmd)) {}
	proc_cluster_stop(c);
}

/* `unicorn run` of n tokens in the background (output discarded). */
static pid_t generate(const struct proc_cluster *c, int n)
{
	char cmd[600];
	snprintf(cmd, sizeof cmd, "exec %s/unicorn run --name %s --max-tokens %d '" PROMPT
		 "' >/dev/null", proc_bin_dir_or_skip(), c->name, n);
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	char err[160];
	snprintf(err, sizeof err, "%s/run.err", c->tmp);
	pid_t p = proc_spawn(argv, err);
	cr_assert_gt(p, 0);
	return p;
}

static bool have(const char *cmd)
{
	char b[256];
	snprintf(b, sizeof b, "command -v %s >/dev/null 2>&1", cmd);
	return system(b) == 0;
}

static char *run_out(const char *cmd, int *status)
{
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	static char out[65536];
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	*status = pclose(f);
	return out;
}

/* "tokens N" on the top screen (-1 if absent). */
static double top_tokens(const struct proc_cluster *c, char *screen, size_t cap)
{
	(void)c; /* one tmux server per test process */
	char cmd[200];
	snprintf(cmd, sizeof cmd, "tmux -L %s capture-pane -p -t top", tmux_name);
	int st;
	char *s = run_out(cmd, &st);
	snprintf(screen, cap, "%s", s);
	cr_assert_eq(st, 0, "tmux capture-pane failed: %s", s);
	char *t = strstr(s, "\ntokens ");
	double v = -1;
	if (t)
		sscanf(t + 8, "%lf", &v);
	return v;
}

static void check_metrics(const struct proc_cluster *c)
{
	char *body = NULL;
	size_t len = 0;
	int st = 0;
	cr_assert_eq(dashboard_fetch(c->name, "/metrics", 10, &body, &len, &st), 0, "%s", err_msg());
	cr_assert_eq(st, 200, "%s", body);
	char path[200];
	snprintf(path, sizeof path, "%s/metrics.txt", c->tmp);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fwrite(body, 1, len, f);
	fclose(f);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", path);
	char *out = run_out(cmd, &st);
	cr_assert_eq(st, 0, "promtool check metrics failed:\n%s", out);
	double tok = 0, busy_gpu = 0, busy_npu = 0, ttft = 0, itl = 0;
	char *p;
	if ((p = strstr(body, "\nunicorn_generated_tokens_total ")))
		tok = strtod(p + 32, NULL);
	if ((p = strstr(body, "\nunicorn_worker_busy_seconds_total{worker=\"gpu\"} ")))
		busy_gpu = strtod(p + 50, NULL);
	if ((p = strstr(body, "\nunicorn_worker_busy_seconds_total{worker=\"npu\"} ")))
		busy_npu = strtod(p + 50, NULL);
	if ((p = strstr(body, "\nunicorn_time_to_first_token_seconds_count ")))
		ttft = strtod(p + 43, NULL);
	if ((p = strstr(body, "\nunicorn_inter_token_latency_seconds_count ")))
		itl = strtod(p + 43, NULL);
	cr_assert_gt(tok, 10, "tokens counter: %s", body);
	cr_assert_gt(busy_gpu, 0, "gpu busy time");
	cr_assert_gt(busy_npu, 0, "npu busy time");
	cr_assert_geq(ttft, 1, "TTFT histogram count");
	cr_assert_gt(itl, 5, "ITL histogram count");
	cr_assert_not_null(strstr(body, "unicorn_inter_token_latency_seconds_bucket{le=\"+Inf\"}"));
	free(body);
}

static void check_trace(const struct proc_cluster *c, const char *path)
{
	json_error_t e;
	json_t *j = json_load_file(path, 0, &e);
	cr_assert_not_null(j, "%s: %s", path, e.text);
	json_t *ev = json_object_get(j, "traceEvents");
	cr_assert(json_is_array(ev));
	bool tid[3] = { false }, layer[256] = { false };
	int n_x = 0, n_layers = 0;
	size_t i;
	json_t *x;
	json_array_foreach(ev, i, x) {
		const char *ph = json_string_value(json_object_get(x, "ph"));
		if (!ph || strcmp(ph, "X"))
			continue;
		n_x++;
		cr_assert(json_is_number(json_object_get(x, "ts")) &&
			  json_is_number(json_object_get(x, "dur")));
		json_int_t t = json_integer_value(json_object_get(x, "tid"));
		cr_assert(t == 1 || t == 2, "tid %lld", (long long)t);
		tid[t] = true;
		json_t *l = json_object_get(json_object_get(x, "args"), "layer");
		if (json_is_integer(l) && json_integer_value(l) >= 0 && json_integer_value(l) < 256 &&
		    !layer[json_integer_value(l)]) {
			layer[json_integer_value(l)] = true;
			n_layers++;
		}
	}
	cr_assert_gt(n_x, 10, "only %d X events", n_x);
	cr_assert(tid[1] && tid[2], "spans of both workers (gpu %d, npu %d)", tid[1], tid[2]);
	cr_assert_geq(n_layers, 3, "spans of only %d layers", n_layers);
	json_decref(j);
	(void)c;
}

Test(obs, live_cluster, .timeout = 180)
{
	if (!have("promtool"))
		cr_assert_fail("promtool not found: setup.sh installs it (Debian package prometheus)");
	if (!have("tmux"))
		cr_assert_fail("tmux not found: setup.sh installs it (Debian package tmux)");
	if (access("/usr/bin/chromium", X_OK))
		cr_assert_fail("/usr/bin/chromium not found: setup.sh installs it (Debian package "
			       "chromium)");
	if (access("node_modules/playwright-core/package.json", F_OK))
		cr_assert_fail("node_modules/playwright-core missing: run `npm ci` (setup.sh does)");
	struct proc_cluster c;
	start(&c);
	double t0 = proc_now_s();
	const char *bin = proc_bin_dir_or_skip();
	char cmd[1024];
	/* unicorn top in a detached tmux session (its own server socket) */
	snprintf(cmd, sizeof cmd, "tmux -L %s new-session -d -s top -x 160 -y 40 "
		 "'XDG_RUNTIME_DIR=%s %s/unicorn top --name %s'", tmux_name, c.tmp, bin, c.name);
	cr_assert_eq(system(cmd), 0, "tmux new-session failed");
	pid_t gen = generate(&c, 400);
	/* two screens of top during the generation: the tokens counter moved */
	static char s1[65536], s2[65536];
	double a = -1, b = -1, end = proc_now_s() + 20;
	while (a <= 0 && proc_now_s() < end) {
		usleep(300 * 1000);
		a = top_tokens(&c, s1, sizeof s1);
	}
	cr_assert_gt(a, 0, "top shows no tokens:\n%s", s1);
	/* the trace covers 2 s of the generation (and gives top time to redraw) */
	char tr[200];
	snprintf(tr, sizeof tr, "%s/trace.json", c.tmp);
	snprintf(cmd, sizeof cmd, "%s/unicorn trace --name %s --seconds 2 -o %s", bin, c.name, tr);
	int st = system(cmd);
	if (st)
		proc_tail(c.log, 40);
	cr_assert_eq(st, 0, "unicorn trace failed");
	b = top_tokens(&c, s2, sizeof s2);
	cr_assert_gt(b, a, "top did not change during the generation:\n%s\n---\n%s", s1, s2);
	cr_assert_not_null(strstr(s2, "gpu "), "%s", s2);
	cr_assert_not_null(strstr(s2, "npu "), "%s", s2);
	check_trace(&c, tr);
	/* top --once: one plain frame */
	snprintf(cmd, sizeof cmd, "%s/unicorn top --name %s --once", bin, c.name);
	char *once = run_out(cmd, &st);
	cr_assert_eq(st, 0, "%s", once);
	cr_assert_not_null(strstr(once, "tok/s"), "%s", once);
	cr_assert_not_null(strstr(once, "\ngpu "), "%s", once);
	cr_assert_null(strchr(once, '\033'), "--once prints no escape sequences");
	/* the web dashboard during a (fresh) generation */
	int ws;
	proc_wait_ms(gen, 60000);
	gen = generate(&c, 400);
	snprintf(cmd, sizeof cmd, "node tests/dashboard_check.mjs http://127.0.0.1:%d "
		 "build/artifacts/dashboard.png >&2", c.port);
	st = system(cmd);
	cr_assert_eq(st, 0, "tests/dashboard_check.mjs failed (status %d)", st);
	check_metrics(&c);
	ws = proc_wait_ms(gen, 60000);
	cr_assert(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "unicorn run: status %d", ws);
	check_metrics(&c);
	cr_log_info("obs checks took %.1f s", proc_now_s() - t0);
	stop(&c);
}
