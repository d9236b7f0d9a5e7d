/* models: what unicorn-up serves without --model (the demo model, then the
 * latest pull) and --model ORG/NAME:QUANT pulled from a loopback Hub. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/readfile.h"
#include "tests/golden.h"
#include "tests/hubserver.h"
#include "tests/proc.h"

struct up {
	char tmp[64], store[96], name[32], log[128], dir[200];
	int port;
	pid_t pid;
	int lock;
};

static void up_init(struct up *u, const char *prefix)
{
	proc_bin_dir_or_skip();
	memset(u, 0, sizeof *u);
	u->lock = proc_cluster_lock();
	snprintf(u->tmp, sizeof u->tmp, "/tmp/unicorn-%s-XXXXXX", prefix);
	cr_assert_not_null(mkdtemp(u->tmp));
	snprintf(u->store, sizeof u->store, "%s/models", u->tmp);
	snprintf(u->name, sizeof u->name, "%.8s%d", prefix, (int)getpid());
	snprintf(u->dir, sizeof u->dir, "%s/unicorn/%s", u->tmp, u->name);
	snprintf(u->log, sizeof u->log, "%s/up.log", u->tmp);
	setenv("XDG_RUNTIME_DIR", u->tmp, 1);
	setenv("UNICORN_MODELS", u->store, 1);
	setenv("HF_TOKEN", "", 1);
	unsetenv("UNICORN_API_KEY");
}

/* unicorn-up [--model model] --name --port; waits for ready (or its exit). */
static void up_start(struct up *u, const char *model)
{
	char up[512], port[16];
	snprintf(up, sizeof up, "%s/unicorn-up", proc_bin_dir());
	u->port = proc_free_port();
	snprintf(port, sizeof port, "%d", u->port);
	char *argv[10] = { up, "--name", u->name, "--port", port };
	int n = 5;
	if (model) {
		argv[n++] = "--model";
		argv[n++] = (char *)model;
	}
	argv[n] = NULL;
	u->pid = proc_spawn(argv, u->log);
	char ready[256];
	snprintf(ready, sizeof ready, "%s/ready", u->dir);
	double end = proc_now_s() + 90;
	while (access(ready, F_OK)) {
		int st;
		if (waitpid(u->pid, &st, WNOHANG) == u->pid) {
			proc_tail(u->log, 40);
			cr_assert_fail("unicorn-up exited (status %d) before ready", st);
		}
		if (proc_now_s() > end) {
			proc_tail(u->log, 40);
			cr_assert_fail("cluster not ready within 90 s");
		}
		usleep(50 * 1000);
	}
	/* the ready line follows the ready file within a loop turn */
	for (int i = 0; i < 100; i++) {
		char *text;
		size_t len;
		if (readfile(u->log, 1u << 24, &text, &len) == 0) {
			bool seen = strstr(text, "unicorn: ready") != NULL;
			free(text);
			if (seen)
				break;
		}
		usleep(20 * 1000);
	}
}

static void up_down(struct up *u)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn down --name %s >/dev/null", proc_bin_dir(), u->name);
	cr_assert_eq(system(cmd), 0, "unicorn down failed");
	cr_assert_neq(proc_wait_ms(u->pid, 15000), -1, "unicorn-up still running");
}

static void up_fini(struct up *u)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s", u->tmp);
	if (system(cmd)) {}
	close(u->lock);
}

/* The log of unicorn-up so far (caller frees). */
static char *up_log(struct up *u)
{
	char *text;
	size_t len;
	cr_assert_eq(readfile(u->log, 1u << 24, &text, &len), 0);
	return text;
}

/* `unicorn run` on the cluster: its stdout; the exit status in *st. */
static void run_hello(struct up *u, char *out, size_t cap, int *st)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "%s/unicorn run --name %s --max-tokens 6 \"Hello\"", proc_bin_dir(), u->name);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = 0;
	int w = pclose(f);
	*st = WIFEXITED(w) ? WEXITSTATUS(w) : -1;
}

Test(models, no_model_serves_the_demo_model, .timeout = 180)
{
	struct up u;
	up_init(&u, "demo");
	char demo[512];
	snprintf(demo, sizeof demo, "%s/unicorn-demo.gguf", proc_bin_dir());
	cr_assert_eq(access(demo, R_OK), 0, "%s is missing: make builds it (needs npm ci)", demo);
	up_start(&u, NULL);
	char *log = up_log(&u);
	cr_assert_not_null(strstr(log, "unicorn-demo.gguf"), "%s", log);
	cr_assert_not_null(strstr(log, "random weights"), "the ready line does not say so:\n%s", log);
	free(log);
	char out[4096];
	int st;
	run_hello(&u, out, sizeof out, &st);
	cr_assert_eq(st, 0, "unicorn run failed: %s", out);
	cr_assert_gt(strlen(out), 1, "no reply");
	up_down(&u);
	up_fini(&u);
}

Test(models, model_repo_is_pulled_then_served_as_latest, .timeout = 240)
{
	struct up u;
	up_init(&u, "mrepo");
	struct hubserver s;
	hs_start(&s);
	char gguf[512];
	snprintf(gguf, sizeof gguf, "%s/golden/gemma3-tiny-q4_0.gguf", golden_shared_dir());
	char *data;
	size_t len;
	cr_assert_eq(readfile(gguf, 1u << 28, &data, &len), 0, "%s", gguf);
	hs_add(&s, "acme/tiny-GGUF", "tiny-Q4_0.gguf", data, len);
	hs_add(&s, "acme/tiny-GGUF", "tiny-F32.gguf", data, 16);
	free(data);
	setenv("HF_ENDPOINT", s.url, 1);

	/* not in the store: unicorn-up pulls it, then serves it */
	up_start(&u, "acme/tiny-GGUF:q4_0");
	char *log = up_log(&u);
	cr_assert_not_null(strstr(log, "pulling"), "%s", log);
	cr_assert_null(strstr(log, "random weights"), "%s", log);
	free(log);
	cr_assert_eq(hs_count(&s, "/resolve/main/tiny-Q4_0.gguf", NULL), 1, "%s", hs_dump(&s));
	char out[4096];
	int st;
	run_hello(&u, out, sizeof out, &st);
	cr_assert_eq(st, 0, "unicorn run failed: %s", out);
	up_down(&u);

	/* no --model: the latest pull */
	cr_assert_eq(truncate(u.log, 0), 0);
	up_start(&u, NULL);
	log = up_log(&u);
	cr_assert_not_null(strstr(log, "models/acme/tiny-GGUF/tiny-Q4_0.gguf"), "%s", log);
	cr_assert_null(strstr(log, "random weights"), "%s", log);
	free(log);
	up_down(&u);

	/* in the store: nothing is downloaded again */
	cr_assert_eq(truncate(u.log, 0), 0);
	up_start(&u, "hf.co/acme/tiny-GGUF:Q4_0");
	cr_assert_eq(hs_count(&s, "/resolve/main/", NULL), 1, "%s", hs_dump(&s));
	up_down(&u);

	/* a repo that does not exist: a sentence, exit 2, no cluster */
	char cmd[600];
	snprintf(cmd, sizeof cmd, "%s/unicorn-up --name %s --model acme/nothing 2>&1", proc_bin_dir(), u.name);
	FILE *f = popen(cmd, "r");
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	int w = pclose(f);
	cr_assert(WIFEXITED(w) && WEXITSTATUS(w) == 2, "status %d: %s", w, out);
	cr_assert_not_null(strstr(out, "404"), "%s", out);
	cr_assert_not_null(strstr(out, "acme/nothing"), "%s", out);
	hs_stop(&s);
	up_fini(&u);
}
