/* cluster: integration of the real processes (bin/unicorn-up and what it
 * spawns) on the tiny golden model: greedy output equals the CPU reference in
 * fused and split placement, survives kill -9 of every role and SIGSTOP of a
 * worker with bit-identical tokens, and `unicorn down` leaves nothing behind.
 *
 * Needs UNICORN_BIN (set by `make test`); skipped otherwise. The cluster tests
 * take a file lock so two of them never run at once (each starts Vulkan
 * workers; the CI box has 2 cores). */
#include <criterion/criterion.h>

#include "tests/proc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/golden.h"
#include "common/err.h"
#include "formats/model.h"
#include "ref/ref.h"

#define PROMPT "Once upon a time"
#define N_GEN 24

struct cluster {
	char tmp[64];        /* XDG_RUNTIME_DIR of this test */
	char name[32];
	char dir[160];       /* the runtime dir */
	char log[128];
	pid_t sup;
	int lock_fd;
	int n_seen;
	pid_t seen[256];     /* every child pid ever observed, for the leak check */
};

static void model_path(char *out, size_t n)
{
	snprintf(out, n, "%s/golden/gemma3-tiny-q4_0.gguf", golden_shared_dir());
}

/* The pid of the live (non-zombie) child of the supervisor whose argv[0] ends
 * in exe, or 0. */
static pid_t child_pid(struct cluster *c, const char *exe)
{
	pid_t found = proc_child_of(c->sup, exe);
	if (found) {
		bool known = false;
		for (int i = 0; i < c->n_seen; i++)
			known |= c->seen[i] == found;
		if (!known && c->n_seen < 256)
			c->seen[c->n_seen++] = found;
	}
	return found;
}

static int count_fds(pid_t pid)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(p);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static bool file_exists(const struct cluster *c, const char *f)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", c->dir, f);
	return access(p, F_OK) == 0;
}

static void wait_ready(struct cluster *c, double timeout)
{
	double end = proc_now_s() + timeout;
	while (!file_exists(c, "ready")) {
		int st;
		if (waitpid(c->sup, &st, WNOHANG) == c->sup) {
			proc_tail(c->log, 60);
			cr_assert_fail("unicorn-up exited (status %d) before the cluster was ready", st);
		}
		if (proc_now_s() > end) {
			proc_tail(c->log, 60);
			cr_assert_fail("cluster not ready within %.0f s", timeout);
		}
		usleep(50 * 1000);
	}
}

static void start(struct cluster *c, const char *placement)
{
	const char *bin = proc_bin_dir();
	memset(c, 0, sizeof *c);
	c->lock_fd = proc_cluster_lock();
	snprintf(c->tmp, sizeof c->tmp, "/tmp/unicorn-cl-XXXXXX");
	cr_assert_not_null(mkdtemp(c->tmp));
	snprintf(c->name, sizeof c->name, "t%d", (int)getpid());
	snprintf(c->dir, sizeof c->dir, "%s/unicorn/%s", c->tmp, c->name);
	snprintf(c->log, sizeof c->log, "%s/up.log", c->tmp);
	setenv("XDG_RUNTIME_DIR", c->tmp, 1);
	char up[512], model[512];
	snprintf(up, sizeof up, "%s/unicorn-up", bin);
	model_path(model, sizeof model);
	c->sup = fork();
	cr_assert_geq(c->sup, 0);
	if (c->sup == 0) {
		int fd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(up, up, "--model", model, "--name", c->name, "--placement", placement,
		      "--attn-backend", "vulkan", (char *)NULL);
		_exit(127);
	}
	wait_ready(c, 90);
}

/* `unicorn run --json`: the generated ids (and the prompt ids). */
struct run {
	FILE *f;
	uint32_t ids[N_GEN], prompt[64];
	int n_ids, n_prompt;
};

static void run_begin(struct run *r, const struct cluster *c)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --json --max-tokens %d '" PROMPT "'",
		 proc_bin_dir(), c->name, N_GEN);
	memset(r, 0, sizeof *r);
	r->f = popen(cmd, "r");
	cr_assert_not_null(r->f);
}

static void run_end(struct run *r, const struct cluster *c)
{
	static char out[65536];
	size_t n = fread(out, 1, sizeof out - 1, r->f);
	out[n] = 0;
	int st = pclose(r->f);
	if (st)
		proc_tail(c->log, 60);
	cr_assert_eq(st, 0, "unicorn run failed (status %d): %s", st, out);
	json_error_t je;
	json_t *j = json_loads(out, 0, &je);
	cr_assert_not_null(j, "unicorn run --json: %s: %s", je.text, out);
	json_t *ids = json_object_get(j, "ids"), *pids = json_object_get(j, "prompt_ids");
	cr_assert(json_is_array(ids) && json_is_array(pids), "%s", out);
	size_t i;
	json_t *v;
	json_array_foreach(ids, i, v) {
		cr_assert_lt(i, N_GEN, "more than %d tokens", N_GEN);
		r->ids[r->n_ids++] = (uint32_t)json_integer_value(v);
	}
	json_array_foreach(pids, i, v) {
		cr_assert_lt(i, 64);
		r->prompt[r->n_prompt++] = (uint32_t)json_integer_value(v);
	}
	json_decref(j);
}

static void run_sync(struct run *r, const struct cluster *c)
{
	run_begin(r, c);
	run_end(r, c);
}

static void assert_same(const struct run *a, const struct run *b, const char *what)
{
	cr_assert_eq(a->n_ids, b->n_ids, "%s: %d tokens vs %d", what, a->n_ids, b->n_ids);
	for (int i = 0; i < a->n_ids; i++)
		cr_assert_eq(a->ids[i], b->ids[i], "%s: token %d: %u vs %u", what, i, a->ids[i], b->ids[i]);
}

/* Greedy continuation of the prompt ids by the CPU reference. */
static void assert_reference(const struct run *r)
{
	char path[512];
	model_path(path, sizeof path);
	struct model *m;
	cr_assert_eq(model_open(path, &m), 0, "%s", err_msg());
	struct ref_model *rm;
	cr_assert_eq(ref_create(m, 256, &rm), 0, "%s", err_msg());
	uint32_t nv = m->cfg.n_vocab;
	float *logits = malloc(sizeof(float) * nv);
	cr_assert_not_null(logits);
	cr_assert_gt(r->n_prompt, 0);
	uint32_t pos = 0;
	for (int i = 0; i < r->n_prompt; i++, pos++)
		cr_assert_eq(ref_forward(rm, r->prompt[i], pos, logits), 0, "%s", err_msg());
	cr_assert_eq(r->n_ids, N_GEN);
	for (int i = 0; i < N_GEN; i++, pos++) {
		uint32_t want = golden_argmax(logits, nv);
		cr_assert_eq(r->ids[i], want, "token %d: cluster %u, reference %u", i, r->ids[i], want);
		cr_assert_eq(ref_forward(rm, want, pos, logits), 0, "%s", err_msg());
	}
	free(logits);
	ref_destroy(rm);
	model_close(m);
}

static pid_t wait_new_pid(struct cluster *c, const char *exe, pid_t old, double timeout)
{
	double end = proc_now_s() + timeout;
	pid_t p;
	while (((p = child_pid(c, exe)) == 0 || p == old) && proc_now_s() < end)
		usleep(20 * 1000);
	if (p == 0 || p == old)
		proc_tail(c->log, 60);
	cr_assert(p != 0 && p != old, "%s (pid %d) not replaced within %.1f s", exe, (int)old, timeout);
	return p;
}

/* Kill exe with sig while a generation runs; the result must equal base. */
static void kill_during_run(struct cluster *c, const char *exe, const struct run *base, double restart_s)
{
	pid_t victim = child_pid(c, exe);
	cr_assert_gt(victim, 0, "no %s running", exe);
	struct run r;
	run_begin(&r, c);
	usleep(300 * 1000);
	cr_assert_eq(kill(victim, SIGKILL), 0);
	double t0 = proc_now_s();
	wait_new_pid(c, exe, victim, restart_s);
	cr_log_info("%s restarted after %.2f s", exe, proc_now_s() - t0);
	run_end(&r, c);
	assert_same(base, &r, exe);
}

static void down(struct cluster *c)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn down --name %s >/dev/null", proc_bin_dir(), c->name);
	int st = system(cmd);
	cr_assert_eq(st, 0, "unicorn down failed");
	int ws;
	double end = proc_now_s() + 15;
	pid_t r;
	while ((r = waitpid(c->sup, &ws, WNOHANG)) == 0 && proc_now_s() < end)
		usleep(20 * 1000);
	cr_assert_eq(r, c->sup, "unicorn-up still running after unicorn down");
	cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "unicorn-up exit status %d", ws);
	for (int i = 0; i < c->n_seen; i++)
		cr_assert(kill(c->seen[i], 0) == -1 && errno == ESRCH, "child %d left behind",
			  (int)c->seen[i]);
	/* no sockets, pid or ready file left (the dir itself is removed when empty) */
	DIR *d = opendir(c->dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			cr_assert(e->d_name[0] == '.', "%s left in %s", e->d_name, c->dir);
		closedir(d);
	}
	snprintf(cmd, sizeof cmd, "%s/unicorn down --name %s 2>/dev/null", proc_bin_dir(), c->name);
	cr_assert_neq(system(cmd), 0, "down without a cluster must fail clearly");
	snprintf(cmd, sizeof cmd, "rm -rf %s", c->tmp);
	if (system(cmd)) {}
	close(c->lock_fd);
}

TestSuite(cluster, .timeout = 300);

Test(cluster, fused_reference_kills_watchdog_down)
{
	struct cluster c;
	start(&c, "fused");
	struct run base;
	run_sync(&base, &c);
	assert_reference(&base);

	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn status --name %s >/dev/null", proc_bin_dir(), c.name);
	cr_assert_eq(system(cmd), 0, "unicorn status failed");

	kill_during_run(&c, "unicorn-gpu-worker", &base, 2.0);
	kill_during_run(&c, "unicorn-coordinator", &base, 3.0);
	kill_during_run(&c, "unicorn-loader", &base, 3.0);

	/* SIGSTOP: alive but silent; the watchdog (1.5 s) must replace it. */
	pid_t gpu = child_pid(&c, "unicorn-gpu-worker");
	cr_assert_eq(kill(gpu, SIGSTOP), 0);
	double t0 = proc_now_s();
	wait_new_pid(&c, "unicorn-gpu-worker", gpu, 5.0);
	cr_assert_geq(proc_now_s() - t0, 1.0, "replaced before the watchdog deadline");
	struct run again;
	run_sync(&again, &c);
	assert_same(&base, &again, "after watchdog");
	down(&c);
}

/* A process's numeric field from `unicorn status --json` (name: "gpu", ...). */
static double status_field(json_t *st, const char *name, const char *field)
{
	json_t *ps = json_object_get(st, "processes"), *p;
	size_t i;
	json_array_foreach(ps, i, p) {
		const char *n = json_string_value(json_object_get(p, "name"));
		if (n && !strcmp(n, name))
			return json_number_value(json_object_get(p, field));
	}
	cr_assert_fail("no process %s in the status", name);
	return 0;
}

Test(cluster, split_reference_and_npu_kill)
{
	struct cluster c;
	start(&c, "split");
	/* each worker holds what it runs (issue 30): the attention worker the
	 * attention's matrices and the KV cache, the FFN worker (--ffn-only) the
	 * rest and no KV; only the norms are in both */
	char cmd[512], out[16384];
	snprintf(cmd, sizeof cmd, "%s/unicorn status --name %s --json", proc_bin_dir(), c.name);
	cr_assert_eq(proc_sh(cmd, out, sizeof out), 0, "%s", out);
	json_t *st = json_loads(out, 0, NULL);
	cr_assert_not_null(st, "%s", out);
	double all = status_field(st, "loader", "weights_bytes"), gw = status_field(st, "gpu", "weights_bytes"),
	       nw = status_field(st, "npu", "weights_bytes");
	cr_assert(nw > 0 && gw > 0 && gw + nw < all + nw / 2, "weights: gpu %.0f + npu %.0f of the model's %.0f bytes",
		  gw, nw, all);
	cr_assert(status_field(st, "gpu", "kv_bytes") == 0 && status_field(st, "npu", "kv_bytes") > 0, "%s", out);
	json_decref(st);
	struct run base;
	run_sync(&base, &c);
	assert_reference(&base);
	kill_during_run(&c, "unicorn-npu-worker", &base, 2.0);
	kill_during_run(&c, "unicorn-gpu-worker", &base, 2.0);
	down(&c);
}

Test(cluster, kill_storm_leaves_no_leaks)
{
	struct cluster c;
	start(&c, "fused");
	struct run base;
	run_sync(&base, &c);
	int fds0 = count_fds(c.sup);
	cr_assert_gt(fds0, 0);
	static const char *const roles[] = { "unicorn-gpu-worker", "unicorn-coordinator", "unicorn-loader" };
	for (int i = 0; i < 20; i++) {
		const char *exe = roles[i % 3];
		pid_t p = child_pid(&c, exe);
		cr_assert_gt(p, 0, "kill %d: no %s", i, exe);
		cr_assert_eq(kill(p, SIGKILL), 0);
		wait_new_pid(&c, exe, p, 5.0);
	}
	/* Let the cluster settle, then it must still generate the same tokens. */
	wait_ready(&c, 30);
	struct run r;
	run_sync(&r, &c);
	assert_same(&base, &r, "after 20 kills");
	/* a leak stays; a control link that is reconnecting right now does not */
	int fds1 = count_fds(c.sup);
	for (double end = proc_now_s() + 5; fds1 > fds0 && proc_now_s() < end; fds1 = count_fds(c.sup))
		usleep(100 * 1000);
	cr_assert_eq(fds1, fds0, "supervisor fds: %d before, %d after 20 restarts", fds0, fds1);
	int kids = 0;
	for (size_t i = 0; i < 3; i++)
		kids += child_pid(&c, roles[i]) > 0;
	cr_assert_eq(kids, 3);
	down(&c);
}
