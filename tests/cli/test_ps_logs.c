/* unicorn run MODEL (a cluster started for the model, then reused), unicorn ps,
 * unicorn logs, unicorn run --verbose (issue 35). Real clusters on the tiny
 * golden model. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/golden.h"
#include "tests/proc.h"

static char out[1 << 16];

/* bin/unicorn ARGS (printf-style) in the test's runtime dir, stdout and stderr in out. */
static int uni(const char *fmt, ...)
{
	char args[1024], cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof args, fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof cmd, "%s/unicorn %s 2>&1 </dev/null", proc_bin_dir_or_skip(), args);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	int st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count(const char *hay, const char *what)
{
	int k = 0;
	for (const char *p = hay; (p = strstr(p, what)); p += strlen(what))
		k++;
	return k;
}

Test(ps_logs, run_model_starts_then_reuses, .timeout = 300)
{
	proc_bin_dir_or_skip();
	int lock = proc_cluster_lock();
	char tmp[64] = "/tmp/unicorn-runmodel-XXXXXX";
	cr_assert_not_null(mkdtemp(tmp));
	setenv("XDG_RUNTIME_DIR", tmp, 1);
	/* no store pulls from a test */
	char store[128];
	snprintf(store, sizeof store, "%s/models", tmp);
	setenv("UNICORN_MODELS", store, 1);
	char model[512];
	snprintf(model, sizeof model, "%s/golden/gemma3-tiny-q4_0.gguf", golden_shared_dir());

	cr_assert_eq(uni("ps"), 0, "%s", out);
	cr_assert_not_null(strstr(out, "no cluster is running"), "%s", out);

	/* the first run starts cluster 'gemma3-tiny-q4_0' */
	int st = uni("run --max-tokens 3 --verbose %s hello there", model);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert_not_null(strstr(out, "starting cluster 'gemma3-tiny-q4_0'"), "%s", out);
	cr_assert_not_null(strstr(out, "reply tokens:    3 (length)"), "%s", out);
	cr_assert_not_null(strstr(out, "time to first:"), "%s", out);
	cr_assert_not_null(strstr(out, "tok/s"), "%s", out);
	cr_assert_not_null(strstr(out, "prompt tokens:"), "%s", out);

	/* the second reuses it */
	st = uni("run --max-tokens 2 --raw %s hello", model);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert_null(strstr(out, "starting cluster"), "%s", out);

	cr_assert_eq(uni("ps"), 0, "%s", out);
	cr_assert_not_null(strstr(out, "NAME"), "%s", out);
	cr_assert_eq(count(out, "gemma3-tiny-q4_0 "), 1, "one cluster: %s", out);
	cr_assert_not_null(strstr(out, "gemma3-tiny-q4_0.gguf"), "%s", out);
	cr_assert_not_null(strstr(out, "B"), "memory: %s", out);

	/* a prompt (no such file, not ORG/NAME) still goes to --name's cluster */
	cr_assert_eq(uni("run --name gemma3-tiny-q4_0 --max-tokens 2 hi"), 0, "%s", out);

	cr_assert_eq(uni("logs --name gemma3-tiny-q4_0"), 0, "%s", out);
	cr_assert_not_null(strstr(out, "[coordinator]"), "%s", out);
	cr_assert_eq(uni("logs --name nosuch"), 1, "%s", out);
	cr_assert_not_null(strstr(out, "no log of a cluster named 'nosuch'"), "%s", out);

	cr_assert_eq(uni("down --name gemma3-tiny-q4_0"), 0, "%s", out);
	cr_assert_eq(uni("ps"), 0, "%s", out);
	cr_assert_not_null(strstr(out, "no cluster is running"), "%s", out);
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (system(cmd)) {}
	close(lock);
}

Test(ps_logs, foreground_cluster_has_no_log, .timeout = 300)
{
	struct proc_cluster c;
	proc_cluster_start(&c, "fglog", NULL);
	cr_assert_eq(uni("logs --name %s", c.name), 1, "%s", out);
	cr_assert_not_null(strstr(out, "runs in the foreground"), "%s", out);
	cr_assert_eq(uni("ps"), 0, "%s", out);
	cr_assert_not_null(strstr(out, c.name), "%s", out);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", c.port);
	cr_assert_not_null(strstr(out, url), "%s", out);
	proc_cluster_stop(&c);
}
